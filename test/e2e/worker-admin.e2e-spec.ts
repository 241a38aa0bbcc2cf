// Size: R-ADM-1's worker routes over the real listeners on one running app per dialect: the detail's
// active runs, the run detail's log size and attempt session, drain, delete when offline, and the list
// filters; every refused request is compared against a snapshot of all tables.
import { randomBytes } from 'node:crypto';
import { IngressAction, ingressPath, parseOfferResponse } from '@ql/contracts';
import { snapshotDatabase } from '../support/db-snapshot';
import { newSessionId, registerBody, validCapabilities } from '../support/fixtures';
import {
  IngressSession as Session,
  leaseFence as fenceOf,
  pullNewRun,
  startHeldRun,
} from '../support/lease-holder';
import {
  Dialect,
  TestDatabase,
  TestPlane,
  createTestDatabase,
  createTestPki,
  readPair,
  startTestPlane,
} from '../support/test-plane';

const WORKERS = ['worker-a', 'worker-b', 'worker-c', 'worker-d', 'worker-e'];

describe.each<Dialect>(['sqlite', 'postgres'])('admin worker routes (%s)', (dialect) => {
  let db: TestDatabase;
  let pki: Awaited<ReturnType<typeof createTestPki>>;
  let t: TestPlane;
  let names = 0;

  const register = async (workerId: string, labels: Record<string, string> = {}): Promise<Session> => {
    const creds = readPair(pki.workers[workerId]!);
    const sessionId = newSessionId();
    const res = await t.ingress(
      creds,
      ingressPath(workerId, sessionId, 'register'),
      registerBody({ capabilities: validCapabilities({ labels }) }),
    );
    expect(res.status).toBe(200);
    const { generation, version } = res.body as { generation: number; version: number };
    return { workerId, sessionId, creds, generation, version };
  };
  const send = (s: Session, action: IngressAction, body: unknown) =>
    t.ingress(s.creds, ingressPath(s.workerId, s.sessionId, action), body);
  const fence = (s: Session) => ({ generation: s.generation, expectedVersion: s.version });
  const pulledRun = (s: Session) => pullNewRun(t, s, `workers ${dialect} ${++names}`);
  const worker = async (workerId: string) =>
    (await t.admin('GET', `/api/v1/workers/${workerId}`, undefined, t.viewerToken)).body as Record<
      string,
      unknown
    > & { activeRuns: Record<string, unknown>[] };
  const lastAudit = async () =>
    ((await t.admin('GET', '/api/v1/audit?limit=1')).body as { items: { action: string; target: string }[] })
      .items[0];
  /** `request` is refused with `status` and `code` (and `reason`), and no table changes. */
  const refused = async (
    request: () => Promise<{ status: number; body: unknown }>,
    status: number,
    body: Record<string, unknown>,
  ) => {
    const before = await snapshotDatabase(t.plane.core.db);
    const res = await request();
    expect({ status: res.status, body: res.body }).toEqual({ status, body: expect.objectContaining(body) });
    expect(await snapshotDatabase(t.plane.core.db)).toEqual(before);
  };

  beforeAll(async () => {
    db = await createTestDatabase(dialect);
    pki = await createTestPki(WORKERS);
    t = await startTestPlane(db, pki, {
      QL_INGRESS_RATE_BURST: '100000',
      QL_SESSION_LEASE_MS: '600000',
    });
  });
  afterAll(async () => {
    await t?.close();
    await db?.dispose();
    pki?.remove();
  });

  it('the detail lists the live leases of the worker (never a token) and the run detail its attempt, session, exit code and log size', async () => {
    const a = await register('worker-a');
    expect((await worker('worker-a')).activeRuns).toEqual([]);
    const h = await pulledRun(a);
    const version = await startHeldRun(t, a, h);

    const detail = await worker('worker-a');
    expect(detail.activeRuns).toEqual([
      {
        runId: h.offer.run.runId,
        attemptId: h.offer.run.attemptId,
        attemptNo: 1,
        attemptStatus: 'running',
        offerId: h.offer.lease.offerId,
        sessionId: a.sessionId,
        leaseGeneration: 1,
        leaseExpiresAt: expect.any(String),
        startedAt: expect.any(String),
        deadlineAt: expect.any(String),
      },
    ]);
    expect(JSON.stringify(detail)).not.toContain(h.token);

    const logged = await send(a, 'logs', { ...fenceOf(a, h, version), seq: 0, text: 'héllo\n' });
    expect(logged.body).toEqual({ outcome: 'stored', truncated: false });
    const done = await send(a, 'completion', {
      ...fenceOf(a, h, version),
      outcome: 'failed',
      exitCode: 3,
    });
    expect(done.status).toBe(200);
    expect((await worker('worker-a')).activeRuns).toEqual([]);

    const run = (await t.admin('GET', `/api/v1/runs/${h.offer.run.runId}`, undefined, t.viewerToken))
      .body as { log: unknown; attempts: Record<string, unknown>[] };
    expect(run.log).toEqual({ bytes: 7, truncated: false });
    expect(run.attempts).toEqual([
      expect.objectContaining({
        workerId: 'worker-a',
        sessionId: a.sessionId,
        exitCode: 3,
        status: 'failed',
      }),
    ]);
  });

  it('drain: the session goes to draining with capacity 0, its next heartbeat says so and no run is offered; audited', async () => {
    const b = await register('worker-b');
    const res = await t.admin('POST', '/api/v1/workers/worker-b/drain');
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ workerId: 'worker-b', status: 'draining', availableSlots: 0 });
    expect(await lastAudit()).toMatchObject({ action: 'worker.drain', target: 'worker:worker-b' });

    // The version did not move: the worker's next heartbeat is accepted and carries the news.
    const beat = await send(b, 'heartbeat', { ...fence(b), availableSlots: 4 });
    expect({ status: beat.status, body: beat.body }).toEqual({
      status: 200,
      body: expect.objectContaining({ status: 'draining', availableSlots: 0, version: b.version + 1 }),
    });
    const drained = { ...b, version: b.version + 1 };
    const pull = await send(drained, 'offers', {
      ...fence(drained),
      offerId: newSessionId(),
      leaseToken: randomBytes(32).toString('base64url'),
    });
    expect(parseOfferResponse(pull.raw)).toMatchObject({ status: 'idle', idle: { reason: 'draining' } });
  });

  it('drain refuses an unknown worker (404) and one with no live session (409 worker_not_online); nothing is written', async () => {
    await refused(() => t.admin('POST', '/api/v1/workers/worker-zz/drain'), 404, { code: 'not_found' });
    const c = await register('worker-c');
    expect((await send(c, 'offline', fence(c))).status).toBe(200);
    await refused(() => t.admin('POST', '/api/v1/workers/worker-c/drain'), 409, {
      code: 'conflict',
      reason: 'worker_not_online',
    });
    await refused(() => t.admin('POST', '/api/v1/workers/Not_An_Id/drain'), 400, {
      code: 'invalid_request',
    });
  });

  it('delete refuses a live worker and one whose lease is still active (409); nothing is written', async () => {
    await refused(() => t.admin('DELETE', '/api/v1/workers/worker-zz'), 404, { code: 'not_found' });
    const d = await register('worker-d');
    await refused(() => t.admin('DELETE', '/api/v1/workers/worker-d'), 409, {
      code: 'conflict',
      reason: 'worker_not_offline',
    });
    await pulledRun(d);
    // Disabled: the session is offline at once, but the run lease stays active until it ends.
    expect((await t.admin('POST', '/api/v1/workers/worker-d/disable')).status).toBe(200);
    await refused(() => t.admin('DELETE', '/api/v1/workers/worker-d'), 409, {
      code: 'conflict',
      reason: 'worker_holds_leases',
    });
  });

  it('delete of an offline worker: its history stays readable, and its certificate registering again starts a new row after its generations', async () => {
    const runs = (await t.admin('GET', '/api/v1/runs?limit=200')).body as { items: { id: string }[] };
    const a = await register('worker-a'); // a new session replaces the first one (generation 2)
    expect(a.generation).toBe(2);
    expect((await send(a, 'offline', fence(a))).status).toBe(200);

    const res = await t.admin('DELETE', '/api/v1/workers/worker-a');
    expect({ status: res.status, body: res.body }).toEqual({
      status: 200,
      body: expect.objectContaining({ workerId: 'worker-a', status: 'offline', deleted: true }),
    });
    expect(await lastAudit()).toMatchObject({ action: 'worker.delete', target: 'worker:worker-a' });
    expect((await t.admin('GET', '/api/v1/workers/worker-a')).status).toBe(404);
    const sessions = await t.plane.core.db.many<{ n: number | string }>(
      `SELECT COUNT(*) AS n FROM worker_sessions WHERE worker_id = 'worker-a'`,
    );
    expect(Number(sessions[0]!.n)).toBe(2);
    const attempts = await Promise.all(
      runs.items.map(
        async (r) =>
          (await t.admin('GET', `/api/v1/runs/${r.id}`)).body as { attempts: { workerId: string }[] },
      ),
    );
    expect(attempts.flatMap((r) => r.attempts).filter((x) => x.workerId === 'worker-a')).toHaveLength(1);

    const again = await register('worker-a');
    expect({ generation: again.generation, version: again.version }).toEqual({ generation: 3, version: 0 });
    expect(await worker('worker-a')).toMatchObject({ status: 'online', generation: 3, activeRuns: [] });
  });

  it('the list filters by status, label and capabilities digest, combined, with keyset pages; bad filters are 400 naming the parameter', async () => {
    const e = await register('worker-e', { zone: 'edge', tier: '' });
    const list = async (query: string) => {
      const res = await t.admin('GET', `/api/v1/workers?${query}`, undefined, t.viewerToken);
      expect(res.status).toBe(200);
      const body = res.body as { items: { workerId: string }[]; nextAfter: string | null };
      return { ids: body.items.map((w) => w.workerId), nextAfter: body.nextAfter };
    };
    expect((await list('label=zone=edge')).ids).toEqual(['worker-e']);
    expect((await list('label=tier=')).ids).toEqual(['worker-e']);
    expect((await list('label=zone=edg')).ids).toEqual([]);
    expect((await list('status=draining')).ids).toEqual(['worker-b']);
    expect((await list('status=offline')).ids).toEqual(['worker-c']);
    expect((await list('status=disabled')).ids).toEqual(['worker-d']);
    expect((await list('status=online&label=zone=edge')).ids).toEqual(['worker-e']);
    expect((await list('status=offline&label=zone=edge')).ids).toEqual([]);

    const digest = ((await worker('worker-e')) as unknown as { capabilitiesDigest: string })
      .capabilitiesDigest;
    const same = await list(`capabilitiesDigest=${digest}`);
    expect(same.ids).toEqual(['worker-e']);
    const common = ((await worker('worker-b')) as unknown as { capabilitiesDigest: string })
      .capabilitiesDigest;
    const first = await list(`capabilitiesDigest=${common}&limit=2`);
    expect(first).toEqual({ ids: ['worker-a', 'worker-b'], nextAfter: 'worker-b' });
    expect(await list(`capabilitiesDigest=${common}&limit=2&after=${first.nextAfter}`)).toEqual({
      ids: ['worker-c', 'worker-d'],
      nextAfter: 'worker-d',
    });
    expect(await list(`capabilitiesDigest=${common}&limit=2&after=worker-d`)).toEqual({
      ids: [],
      nextAfter: null,
    });

    for (const [query, field] of [
      ['label=zone', 'label'],
      ['label=Bad%20Key=x', 'label'],
      [`label=zone=${'v'.repeat(129)}`, 'label'],
      ['label=a=1&label=b=2', 'label'],
      ['capabilitiesDigest=abc', 'capabilitiesDigest'],
      [`capabilitiesDigest=${'A'.repeat(64)}`, 'capabilitiesDigest'],
      ['status=busy', 'status'],
      ['colour=red', 'query'],
    ]) {
      const res = await t.admin('GET', `/api/v1/workers?${query}`);
      expect({ query, status: res.status, body: res.body }).toEqual({
        query,
        status: 400,
        body: expect.objectContaining({
          code: 'invalid_request',
          detail: expect.stringMatching(`^${field}`),
        }),
      });
    }
    expect(e.generation).toBe(1);

    // A new session with other labels: the filter follows the labels of the current session.
    await register('worker-e', { zone: 'core' });
    expect((await list('label=zone=edge')).ids).toEqual([]);
    expect((await list('label=tier=')).ids).toEqual([]);
    expect((await list('label=zone=core')).ids).toEqual(['worker-e']);
    // …and an unchanged restart keeps them.
    await register('worker-e', { zone: 'core' });
    expect((await list('label=zone=core')).ids).toEqual(['worker-e']);
  });
});
