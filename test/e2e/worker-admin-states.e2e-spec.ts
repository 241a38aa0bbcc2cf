// Issue 16 items 3 and 4 over the real listeners, one plane per dialect with the shortest session
// lease (5 s): the effective worker status the admin views show and filter by, equal to /metrics, and
// the admin state machine (drain ↔ resume, disable ↔ enable, delete) with refusals that name the next
// step and change nothing (ADR 0035).
import { ingressPath } from '@ql/contracts';
import { snapshotDatabase } from '../support/db-snapshot';
import { newSessionId, registerBody } from '../support/fixtures';
import { IngressSession as Session, pullNewRun } from '../support/lease-holder';
import { eventually } from '../support/remote-run-harness';
import {
  Dialect,
  TestDatabase,
  TestPlane,
  createTestDatabase,
  createTestPki,
  readPair,
  startTestPlane,
} from '../support/test-plane';

const WORKERS = ['worker-a', 'worker-b', 'worker-c', 'worker-d', 'worker-e', 'worker-f', 'worker-g'];

describe.each<Dialect>(['sqlite', 'postgres'])('worker admin states (%s)', (dialect) => {
  let db: TestDatabase;
  let pki: Awaited<ReturnType<typeof createTestPki>>;
  let t: TestPlane;

  const register = async (workerId: string): Promise<Session> => {
    const creds = readPair(pki.workers[workerId]!);
    const sessionId = newSessionId();
    const res = await t.ingress(creds, ingressPath(workerId, sessionId, 'register'), registerBody());
    expect(res.status).toBe(200);
    const { generation, version } = res.body as { generation: number; version: number };
    return { workerId, sessionId, creds, generation, version };
  };
  const heartbeat = async (s: Session) => {
    const res = await t.ingress(s.creds, ingressPath(s.workerId, s.sessionId, 'heartbeat'), {
      generation: s.generation,
      expectedVersion: s.version,
      availableSlots: 4,
    });
    expect(res.status).toBe(200);
    return { session: { ...s, version: s.version + 1 }, body: res.body as Record<string, unknown> };
  };
  const list = async (query: string) => {
    const res = await t.admin('GET', `/api/v1/workers?${query}`, undefined, t.viewerToken);
    expect(res.status).toBe(200);
    const body = res.body as { items: { workerId: string; status: string }[]; nextAfter: string | null };
    return { ids: body.items.map((w) => w.workerId), nextAfter: body.nextAfter };
  };
  const statusOf = async (workerId: string) =>
    (
      (await t.admin('GET', `/api/v1/workers/${workerId}`, undefined, t.viewerToken)).body as {
        status: string;
      }
    ).status;
  const metricCounts = async () => {
    const text = (await t.admin('GET', '/metrics', undefined, t.viewerToken)).raw;
    return Object.fromEntries(
      [...text.matchAll(/^ql_worker_sessions\{status="(\w+)"\} (\d+)$/gm)].map((m) => [m[1], Number(m[2])]),
    );
  };
  /** `request` is refused with 409 `reason` and a detail naming `next`, and no table changes. */
  const refused = async (method: string, path: string, reason: string, next: RegExp) => {
    const before = await snapshotDatabase(t.plane.core.db);
    const res = await t.admin(method, path);
    expect({ status: res.status, body: res.body }).toEqual({
      status: 409,
      body: expect.objectContaining({ code: 'conflict', reason, detail: expect.stringMatching(next) }),
    });
    expect(await snapshotDatabase(t.plane.core.db)).toEqual(before);
  };

  beforeAll(async () => {
    db = await createTestDatabase(dialect);
    pki = await createTestPki(WORKERS);
    t = await startTestPlane(db, pki, { QL_INGRESS_RATE_BURST: '100000', QL_SESSION_LEASE_MS: '5000' });
  });
  afterAll(async () => {
    await t?.close();
    await db?.dispose();
    pki?.remove();
  });

  it('a worker whose session lease passed is listed expired, filtered as expired with keyset pages, as /metrics counts it', async () => {
    const a = await register('worker-a');
    expect(
      (
        await t.ingress(a.creds, ingressPath(a.workerId, a.sessionId, 'offline'), {
          generation: a.generation,
          expectedVersion: a.version,
        })
      ).status,
    ).toBe(200);
    await register('worker-b');
    expect((await t.admin('POST', '/api/v1/workers/worker-b/disable')).status).toBe(200);
    await register('worker-c');
    await register('worker-d');
    // No heartbeat: their 5 s session leases pass by the database's clock.
    await eventually('worker-c and worker-d expired', async () =>
      (await list('status=expired')).ids.length === 2 ? true : undefined,
    );
    await register('worker-e');
    await register('worker-f');
    expect((await t.admin('POST', '/api/v1/workers/worker-f/drain')).status).toBe(200);

    expect(await statusOf('worker-c')).toBe('expired');
    expect(await statusOf('worker-b')).toBe('disabled');
    expect((await list('status=online')).ids).toEqual(['worker-e']);
    expect((await list('status=draining')).ids).toEqual(['worker-f']);
    expect((await list('status=offline')).ids).toEqual(['worker-a']);
    expect((await list('status=disabled')).ids).toEqual(['worker-b']);
    expect(await list('status=expired&limit=1')).toEqual({ ids: ['worker-c'], nextAfter: 'worker-c' });
    expect(await list('status=expired&limit=1&after=worker-c')).toEqual({
      ids: ['worker-d'],
      nextAfter: 'worker-d',
    });
    expect(await list('status=expired&limit=1&after=worker-d')).toEqual({ ids: [], nextAfter: null });
    const all = (await t.admin('GET', '/api/v1/workers', undefined, t.viewerToken)).body as {
      items: { status: string }[];
    };
    const shown: Record<string, number> = { online: 0, draining: 0, expired: 0, offline: 0, disabled: 0 };
    for (const w of all.items) shown[w.status]!++;
    expect(await metricCounts()).toEqual(shown);
    expect(shown).toEqual({ online: 1, draining: 1, expired: 2, offline: 1, disabled: 1 });
  });

  it('drain ↔ resume, disable ↔ enable, delete: each refusal names the step that works and writes nothing', async () => {
    let g = await register('worker-g');
    await refused('POST', '/api/v1/workers/worker-g/enable', 'worker_not_disabled', /online and takes runs/);
    expect((await t.admin('POST', '/api/v1/workers/worker-g/drain')).body).toMatchObject({
      status: 'draining',
      availableSlots: 0,
    });
    // The trap: enable answered 200 and left it draining; delete blamed a missing drain.
    await refused('POST', '/api/v1/workers/worker-g/enable', 'worker_not_disabled', /\/resume/);
    await refused(
      'DELETE',
      '/api/v1/workers/worker-g',
      'worker_not_offline',
      /draining.*stop the worker process.*\/disable/,
    );
    const resumed = await t.admin('POST', '/api/v1/workers/worker-g/resume');
    expect({ status: resumed.status, body: resumed.body }).toEqual({
      status: 200,
      body: expect.objectContaining({ status: 'online', availableSlots: 4 }),
    });
    expect(
      ((await t.admin('GET', '/api/v1/audit?limit=1')).body as { items: { action: string }[] }).items[0],
    ).toMatchObject({ action: 'worker.resume', target: 'worker:worker-g' });
    // The same session, version unmoved: its next heartbeat is accepted and answers online; it pulls.
    const beat = await heartbeat(g);
    expect(beat.body).toMatchObject({ status: 'online', availableSlots: 4 });
    g = beat.session;
    await pullNewRun(t, g, `states ${dialect}`);

    expect((await t.admin('POST', '/api/v1/workers/worker-g/disable')).body).toMatchObject({
      status: 'disabled',
    });
    await refused('POST', '/api/v1/workers/worker-g/drain', 'worker_not_online', /\/enable/);
    await refused('POST', '/api/v1/workers/worker-g/resume', 'worker_not_draining', /\/enable/);
    await refused('DELETE', '/api/v1/workers/worker-g', 'worker_holds_leases', /lease sweeper/);
    // A disabled worker registering is refused with its own reason (the worker exits 5 on it).
    const again = await t.ingress(
      g.creds,
      ingressPath('worker-g', newSessionId(), 'register'),
      registerBody(),
    );
    expect({ status: again.status, body: again.body }).toEqual({
      status: 409,
      body: expect.objectContaining({ reason: 'worker_disabled' }),
    });
    expect((await t.admin('POST', '/api/v1/workers/worker-g/enable')).body).toMatchObject({
      status: 'offline',
      disabled: false,
    });
    await refused(
      'POST',
      '/api/v1/workers/worker-g/enable',
      'worker_not_disabled',
      /offline; start the worker/,
    );
    expect((await register('worker-g')).generation).toBe(2);
  });
});
