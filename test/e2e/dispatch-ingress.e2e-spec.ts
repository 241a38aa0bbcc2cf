// Size: the dispatch flow over the real mTLS ingress (offers, replay, renew, release, cancel, limits)
// on one running app per dialect.
import { randomBytes, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { Agent, request } from 'node:https';
import {
  EXECUTION_OFFER_MAX_BYTES,
  ExecutionOffer,
  IdleOffer,
  IngressAction,
  OfferedLease,
  ingressPath,
  parseOfferResponse,
} from '@ql/contracts';
import { leaseTokenDigest } from '@ql/domain';
import { PemPair } from '../../apps/control-plane/src/pki';
import { newSessionId, registerBody, validCapabilities } from '../support/fixtures';
import {
  Dialect,
  HttpResult,
  TestDatabase,
  TestPlane,
  createTestDatabase,
  createTestPki,
  readPair,
  startTestPlane,
} from '../support/test-plane';

interface Session {
  readonly workerId: string;
  readonly sessionId: string;
  readonly creds: PemPair;
  readonly generation: number;
  readonly version: number;
}
interface TaskView {
  id: string;
  revision: number;
  digest: string;
  spec: Record<string, unknown>;
}
interface RunDetail {
  id: string;
  status: string;
  revision: number;
  cancelRequested: boolean;
  attempts: {
    id: string;
    attemptNo: number;
    status: string;
    workerId: string | null;
    leaseGeneration: number;
  }[];
  events: { seq: number; type: string; attemptId: string | null }[];
}

/** ≥ 256 bits, base64url without padding: what a worker sends as its lease token (R-LSE-1). */
const newToken = () => randomBytes(32).toString('base64url');

describe.each<Dialect>(['sqlite', 'postgres'])('dispatch through the mTLS worker ingress (%s)', (dialect) => {
  let db: TestDatabase;
  let pki: Awaited<ReturnType<typeof createTestPki>>;
  let t: TestPlane;
  let names = 0;

  beforeAll(async () => {
    db = await createTestDatabase(dialect);
    pki = await createTestPki(['worker-a', 'worker-b', 'worker-c', 'worker-d', 'worker-e', 'worker-f']);
    t = await startTestPlane(db, pki, {
      QL_INGRESS_RATE_BURST: '100000',
      // The longest the cache may trust a revocation lookup: a call right after another makes none.
      QL_REVOCATION_CACHE_MS: '5000',
      QL_SESSION_LEASE_MS: '600000',
      // Far longer than any test takes on the real clock: a held run stays held while a test runs.
      QL_PLACEMENT_PREFERENCE_HOLD_MS: '60000',
    });
  });
  afterAll(async () => {
    await t?.close();
    await db?.dispose();
    pki?.remove();
  });
  // Every queued run is offered to any matching worker: a test starts with an empty queue.
  beforeEach(async () => {
    const queued = await t.admin('GET', '/api/v1/runs?status=queued&limit=200');
    for (const run of (queued.body as { items: { id: string }[] }).items)
      expect((await t.admin('POST', `/api/v1/runs/${run.id}/cancel`)).status).toBe(200);
  });

  const register = async (workerId: string, body: unknown = registerBody()): Promise<Session> => {
    const creds = readPair(pki.workers[workerId]!);
    const sessionId = newSessionId();
    const res = await t.ingress(creds, ingressPath(workerId, sessionId, 'register'), body);
    expect(res.status).toBe(200);
    const { generation, version } = res.body as { generation: number; version: number };
    return { workerId, sessionId, creds, generation, version };
  };
  const fence = (s: Session) => ({ generation: s.generation, expectedVersion: s.version });
  const send = (s: Session, action: IngressAction, body: unknown) =>
    t.ingress(s.creds, ingressPath(s.workerId, s.sessionId, action), body);
  const pull = (s: Session, offerId = newSessionId(), leaseToken = newToken()) =>
    send(s, 'offers', { ...fence(s), offerId, leaseToken });
  const leaseBody = (
    s: Session,
    lease: Pick<OfferedLease, 'offerId' | 'leaseGeneration' | 'version'>,
    leaseToken: string,
  ) => ({
    ...fence(s),
    offerId: lease.offerId,
    leaseToken,
    leaseGeneration: lease.leaseGeneration,
    leaseVersion: lease.version,
  });
  const offered = (res: HttpResult): ExecutionOffer => {
    expect(res.status).toBe(200);
    const offer = parseOfferResponse(res.raw);
    if (offer.status !== 'offered') throw new Error(`expected an offer, got ${res.raw}`);
    return offer;
  };
  const idle = (res: HttpResult): IdleOffer['idle'] => {
    expect(res.status).toBe(200);
    const offer = parseOfferResponse(res.raw);
    if (offer.status !== 'idle') throw new Error(`expected idle, got ${res.raw}`);
    return offer.idle;
  };

  const createTask = async (overrides: Record<string, unknown> = {}): Promise<TaskView> => {
    const res = await t.admin('POST', '/api/v1/tasks', {
      name: `dispatch ${dialect} ${++names}`,
      command: 'echo hello',
      runtime: 'shell',
      ...overrides,
    });
    expect(res.status).toBe(201);
    return res.body as TaskView;
  };
  const queueRun = async (taskId: string): Promise<string> => {
    const res = await t.admin('POST', `/api/v1/tasks/${taskId}/runs`, {});
    expect(res.status).toBe(201);
    return (res.body as { run: { id: string } }).run.id;
  };
  const runDetail = async (runId: string): Promise<RunDetail> => {
    const res = await t.admin('GET', `/api/v1/runs/${runId}`);
    expect(res.status).toBe(200);
    return res.body as RunDetail;
  };
  const count = async (table: string, where = '1 = 1', params: Record<string, string> = {}) => {
    const row = await t.plane.core.db.one<{ n: number | string }>(
      `SELECT count(*) AS n FROM ${table} WHERE ${where}`,
      params,
    );
    return Number(row!.n);
  };
  const rows = async () => ({
    leases: await count('run_leases'),
    events: await count('run_events'),
    attempts: await count('attempts'),
  });

  it('offers a queued run pinned to its revision; renew, release and a second lease generation; cancel reaches the holder', async () => {
    const s = await register('worker-a');
    const task = await createTask({
      runtime: 'node',
      command: 'console.log(process.env.GREETING)',
      env: { GREETING: 'hello' },
      timeoutMs: 120_000,
      retry: { maxAttempts: 3, initialBackoffMs: 1000 },
      placement: {
        required: { architectures: ['x64'], runtimes: [{ name: 'node', range: '>=20 <21' }] },
        preferred: [{ key: 'zone', value: 'lab', weight: 10 }],
      },
    });
    const runId = await queueRun(task.id);
    // An edit after the trigger: the run keeps the revision it was made from.
    const edited = await t.admin('PUT', `/api/v1/tasks/${task.id}`, { ...task.spec, command: 'exit 1' });
    expect(edited.body).toMatchObject({ revision: 2, changed: true });

    const offerId = newSessionId();
    const token = newToken();
    const before = await rows();
    const res = await pull(s, offerId, token);
    const offer = offered(res);
    expect(res.headers['content-type']).toContain('application/json');
    expect(Buffer.byteLength(res.raw)).toBeLessThanOrEqual(EXECUTION_OFFER_MAX_BYTES);
    expect(offer.run).toEqual({
      runId,
      taskId: task.id,
      revision: 1,
      attemptId: expect.any(String),
      attemptNo: 1,
    });
    expect(offer.execution).toEqual({ digest: task.digest, spec: task.spec });
    expect(offer.lease).toEqual({
      offerId,
      sessionGeneration: s.generation,
      leaseGeneration: 1,
      version: 0,
      expiresAt: expect.any(String),
    });
    expect(Date.parse(offer.lease.expiresAt)).toBeGreaterThan(Date.now());
    // The token is never returned or stored; only its digest is kept.
    expect(res.raw).not.toContain(token);
    expect(res.raw).not.toContain(leaseTokenDigest(token));
    const stored = await t.plane.core.db.many<Record<string, unknown>>(
      'SELECT * FROM run_leases WHERE offer_id = :offerId',
      { offerId },
    );
    expect(stored).toHaveLength(1);
    expect(stored[0]!.token_digest).toBe(leaseTokenDigest(token));
    expect(JSON.stringify(stored)).not.toContain(token);
    expect(await rows()).toEqual({
      leases: before.leases + 1,
      events: before.events + 2,
      attempts: before.attempts + 1,
    });
    const claimed = await runDetail(runId);
    expect(claimed).toMatchObject({ status: 'dispatching', revision: 1 });
    expect(claimed.attempts).toEqual([
      expect.objectContaining({ id: offer.run.attemptId, status: 'claimed', workerId: 'worker-a' }),
    ]);

    // R-LSE-4: renew bumps the lease version by one and extends the term.
    const renew = await send(s, 'renew', leaseBody(s, offer.lease, token));
    expect(renew.status).toBe(200);
    expect(renew.body).toEqual({
      lease: { ...offer.lease, version: 1, expiresAt: expect.any(String) },
      cancelRequested: false,
    });
    const renewed = (renew.body as { lease: OfferedLease }).lease;
    expect(Date.parse(renewed.expiresAt)).toBeGreaterThanOrEqual(Date.parse(offer.lease.expiresAt));
    expect(renew.raw).not.toContain(token);
    // The same renewal again, as after a lost answer: the lease as it stands.
    const replayed = await send(s, 'renew', leaseBody(s, offer.lease, token));
    expect({ status: replayed.status, body: replayed.body }).toEqual({ status: 200, body: renew.body });
    for (const [body, reason] of [
      [leaseBody(s, { ...renewed, version: renewed.version + 1 }, token), 'lease_version_mismatch'],
      [leaseBody(s, renewed, newToken()), 'lease_token_mismatch'],
      [leaseBody(s, { ...renewed, leaseGeneration: 2 }, token), 'lease_generation_mismatch'],
      [leaseBody(s, { ...renewed, offerId: newSessionId() }, token), 'lease_not_found'],
    ] as const) {
      const stale = await send(s, 'renew', body);
      expect({ reason, status: stale.status, body: stale.body }).toEqual({
        reason,
        status: 409,
        body: { code: 'worker_lease_fenced', message: expect.any(String), reason },
      });
    }
    // R-LSE-5: release before start puts the same attempt back in the queue.
    const release = await send(s, 'release', leaseBody(s, renewed, token));
    expect(release.status).toBe(200);
    expect(release.body).toMatchObject({ lease: { offerId, leaseGeneration: 1, version: 2 } });
    const requeued = await runDetail(runId);
    expect(requeued.status).toBe('queued');
    expect(requeued.events.map((e) => [e.seq, e.type])).toEqual([
      [1, 'run.created'],
      [2, 'run.dispatching'],
      [3, 'attempt.claimed'],
      [4, 'attempt.lease_released'],
      [5, 'run.requeued'],
    ]);
    for (const action of ['renew', 'release'] as const) {
      const gone = await send(s, action, leaseBody(s, { ...renewed, version: 2 }, token));
      expect({ action, status: gone.status, reason: (gone.body as { reason: string }).reason }).toEqual({
        action,
        status: 409,
        reason: 'lease_not_active',
      });
    }
    const oldOffer = await pull(s, offerId, token);
    expect(oldOffer.status).toBe(409);
    expect(oldOffer.body).toMatchObject({ code: 'worker_lease_fenced', reason: 'lease_not_active' });

    // The next pull claims the same attempt under lease generation 2.
    const token2 = newToken();
    const second = offered(await pull(s, newSessionId(), token2));
    expect(second.run).toEqual({ ...offer.run });
    expect(second.lease).toMatchObject({ leaseGeneration: 2, version: 0 });

    // R-RUN-5: a cancel is persisted first and reaches the lease holder in the renew response.
    expect((await t.admin('POST', `/api/v1/runs/${runId}/cancel`)).body).toMatchObject({
      status: 'dispatching',
      cancelRequested: true,
    });
    const told = await send(s, 'renew', leaseBody(s, second.lease, token2));
    expect(told.body).toMatchObject({ lease: { version: 1 }, cancelRequested: true });
    const { lease } = told.body as { lease: OfferedLease };
    expect((await send(s, 'release', leaseBody(s, lease, token2))).status).toBe(200);
    const ended = await runDetail(runId);
    expect(ended.status).toBe('cancelled');
    expect(ended.attempts).toEqual([expect.objectContaining({ status: 'cancelled', leaseGeneration: 2 })]);
    expect(ended.events.map((e) => e.seq)).toEqual(ended.events.map((_e, i) => i + 1));
  });

  it('replay: the same offer id and token answer the same offer byte for byte and write nothing, whatever else is queued', async () => {
    const s = await register('worker-e');
    const other = await register('worker-f');
    const task = await createTask({ priority: 10 });
    const runId = await queueRun(task.id);
    const offerId = newSessionId();
    const token = newToken();
    const res = await pull(s, offerId, token);
    expect(offered(res).run.runId).toBe(runId);
    const offer = offered(res);
    const expectReplay = async (when: string) => {
      const before = await rows();
      const replay = await pull(s, offerId, token);
      expect({ when, status: replay.status, raw: replay.raw }).toEqual({ when, status: 200, raw: res.raw });
      // Anyone else with this offer id is refused: another token, or another worker with the same token.
      for (const [who, attempt] of [
        ['another token', () => pull(s, offerId, newToken())],
        ['another worker', () => pull(other, offerId, token)],
      ] as const) {
        const conflict = await attempt();
        expect({ when, who, status: conflict.status, body: conflict.body }).toEqual({
          when,
          who,
          status: 409,
          body: { code: 'worker_lease_fenced', message: expect.any(String), reason: 'offer_conflict' },
        });
      }
      expect(await rows()).toEqual(before);
    };
    // Another matching run is queued (a fresh claim would have something to take) ...
    const lowPriority = await createTask();
    const waiting = await queueRun(lowPriority.id);
    await expectReplay('another run queued');
    expect((await runDetail(waiting)).status).toBe('queued');
    // ... and nothing else is queued: a lost response must still be recoverable (R-LSE-3).
    expect((await t.admin('POST', `/api/v1/runs/${waiting}/cancel`)).status).toBe(200);
    await expectReplay('nothing else queued');
    // A replay after a renewal rebuilds the offer with the current lease version.
    const renew = await send(s, 'renew', leaseBody(s, offer.lease, token));
    const renewed = (renew.body as { lease: OfferedLease }).lease;
    expect(renewed.version).toBe(1);
    expect(offered(await pull(s, offerId, token)).lease).toEqual(renewed);
  });

  it('the largest task spec still fits one offer (≤ 128 KiB) that the strict parser accepts', async () => {
    const s = await register('worker-d');
    // JSON doubles every quote: 64 KiB of escaped command plus 28 KiB of env, just under the 96 KiB spec cap.
    const env = Object.fromEntries(Array.from({ length: 7 }, (_, i) => [`VAR_${i}`, 'v'.repeat(4096)]));
    const task = await createTask({ command: '"'.repeat(32 * 1024), env });
    const runId = await queueRun(task.id);
    const res = await pull(s);
    const offer = offered(res);
    expect(offer.run.runId).toBe(runId);
    expect(offer.execution.digest).toBe(task.digest);
    expect(Buffer.byteLength(res.raw)).toBeGreaterThan(90 * 1024);
    expect(Buffer.byteLength(res.raw)).toBeLessThanOrEqual(EXECUTION_OFFER_MAX_BYTES);
  });

  it('a pull from a replaced session is 409 session_replaced and claims nothing', async () => {
    const first = await register('worker-b');
    const second = await register('worker-b');
    expect(second.generation).toBe(first.generation + 1);
    const task = await createTask();
    const runId = await queueRun(task.id);
    const before = await rows();
    const stale = await pull(first);
    expect(stale.status).toBe(409);
    expect(stale.body).toEqual({
      code: 'worker_session_fenced',
      message: expect.any(String),
      reason: 'session_replaced',
    });
    expect(await rows()).toEqual(before);
    expect(await runDetail(runId)).toMatchObject({ status: 'queued', attempts: [] });
    // The run was claimable all along: the current session gets it.
    expect(offered(await pull(second)).run.runId).toBe(runId);
    // The old session id with the new generation is still the old session; a stale version is fenced too.
    const mixed = await pull({ ...first, generation: second.generation });
    expect(mixed.body).toMatchObject({ code: 'worker_session_fenced', reason: 'session_replaced' });
    const staleVersion = await pull({ ...second, version: second.version + 1 });
    expect(staleVersion.body).toMatchObject({ code: 'worker_session_fenced', reason: 'version_mismatch' });
  });

  it('answers idle with a reason and counters, and writes nothing', async () => {
    const s = await register('worker-c');
    const before = await rows();
    const offerId = newSessionId();
    const res = await pull(s, offerId);
    expect(idle(res)).toEqual({ reason: 'no_queued_runs', activeLeases: 0, capacity: 4, scanned: 0 });
    expect(await count('run_leases', 'offer_id = :offerId', { offerId })).toBe(0);

    const arm = await createTask({ placement: { required: { architectures: ['arm64'] } } });
    const armRun = await queueRun(arm.id);
    expect(idle(await pull(s))).toEqual({
      reason: 'no_matching_run',
      activeLeases: 0,
      capacity: 4,
      scanned: 1,
    });
    expect((await runDetail(armRun)).status).toBe('queued');

    const any = await createTask();
    await queueRun(any.id);
    const full = await register('worker-c', registerBody({ availableSlots: 0 }));
    expect(idle(await pull(full))).toMatchObject({ reason: 'no_capacity', capacity: 0 });
    const drained = await send(full, 'drain', fence(full));
    expect(drained.status).toBe(200);
    const draining = { ...full, version: (drained.body as { version: number }).version };
    expect(idle(await pull(draining))).toMatchObject({ reason: 'draining' });
    expect((await rows()).leases).toBe(before.leases);
  });

  it('a run with preferred labels goes first to the worker that has them: the other answers idle preferred_elsewhere', async () => {
    const plain = await register('worker-e');
    const labels = { zone: 'lab', pool: 'fast' };
    const fast = await register('worker-f', registerBody({ capabilities: validCapabilities({ labels }) }));
    const task = await createTask({ placement: { preferred: [{ key: 'pool', value: 'fast', weight: 10 }] } });
    const runId = await queueRun(task.id);
    const before = await rows();
    expect(idle(await pull(plain))).toMatchObject({ reason: 'preferred_elsewhere', scanned: 1 });
    expect(await rows()).toEqual(before);
    expect(offered(await pull(fast)).run.runId).toBe(runId);
  });

  describe('bad bodies are 400 invalid_worker_request before any statement', () => {
    let s: Session;
    beforeAll(async () => {
      s = await register('worker-c');
    });
    const valid = () => ({
      generation: s.generation,
      expectedVersion: s.version,
      offerId: newSessionId(),
      leaseToken: newToken(),
    });
    const lease = () => ({ ...valid(), leaseGeneration: 1, leaseVersion: 0 });
    const without = <T extends object>(body: T, ...keys: (keyof T)[]) =>
      Object.fromEntries(Object.entries(body).filter(([k]) => !keys.includes(k as keyof T)));

    it.each<[string, IngressAction, () => unknown]>([
      ['an unknown field', 'offers', () => ({ ...valid(), workerId: 'worker-c' })],
      ['a session id in the body', 'offers', () => ({ ...valid(), sessionId: s.sessionId })],
      [
        'a short token (42 chars)',
        'offers',
        () => ({ ...valid(), leaseToken: randomBytes(31).toString('base64url') }),
      ],
      ['a padded token', 'offers', () => ({ ...valid(), leaseToken: `${newToken()}=` })],
      ['a token of 129 chars', 'offers', () => ({ ...valid(), leaseToken: 'A'.repeat(129) })],
      ['a non-string token', 'offers', () => ({ ...valid(), leaseToken: 42 })],
      ['a missing token', 'offers', () => without(valid(), 'leaseToken')],
      ['a UUIDv4 offer id', 'offers', () => ({ ...valid(), offerId: randomUUID() })],
      ['an upper-case offer id', 'offers', () => ({ ...valid(), offerId: newSessionId().toUpperCase() })],
      ['a missing offer id', 'offers', () => without(valid(), 'offerId')],
      ['a missing fence', 'offers', () => without(valid(), 'generation', 'expectedVersion')],
      ['a missing expected version', 'offers', () => without(valid(), 'expectedVersion')],
      ['generation 0', 'offers', () => ({ ...valid(), generation: 0 })],
      ['a string generation', 'offers', () => ({ ...valid(), generation: '1' })],
      ['a fractional expected version', 'offers', () => ({ ...valid(), expectedVersion: 0.5 })],
      ['an array', 'offers', () => [valid()]],
      ['null', 'offers', () => null],
      ['renew without a lease generation', 'renew', () => without(lease(), 'leaseGeneration')],
      ['renew with a negative lease version', 'renew', () => ({ ...lease(), leaseVersion: -1 })],
      ['renew with an unknown field', 'renew', () => ({ ...lease(), cancel: true })],
      ['renew with a short token', 'renew', () => ({ ...lease(), leaseToken: 'abc' })],
      ['release without a lease version', 'release', () => without(lease(), 'leaseVersion')],
      ['release with lease generation 0', 'release', () => ({ ...lease(), leaseGeneration: 0 })],
    ])('%s', async (_name, action, body) => {
      const payload = body();
      // The first call fills the revocation cache; the second must not reach the database at all.
      const warm = await send(s, action, payload);
      const before = t.statements();
      const res = await send(s, action, payload);
      expect(t.statements()).toBe(before);
      for (const r of [warm, res]) {
        expect(r.status).toBe(400);
        expect(r.body).toEqual({ code: 'invalid_worker_request', message: expect.any(String) });
      }
    });

    it('a session id that is not a UUIDv7, with a valid body', async () => {
      const path = ingressPath('worker-c', randomUUID(), 'offers');
      await t.ingress(s.creds, path, valid());
      const before = t.statements();
      const res = await t.ingress(s.creds, path, valid());
      expect(t.statements()).toBe(before);
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({ code: 'invalid_worker_request' });
    });

    it('a pull body over 4 KiB is 413, with or without Content-Length, and never reaches the database', async () => {
      const agent = new Agent({
        ca: readFileSync(pki.caCertPath),
        cert: s.creds.certPem,
        key: s.creds.keyPem,
      });
      // Chunked: no Content-Length for the edge hook to check, so the body parser decides.
      const chunked = (bytes: number) =>
        new Promise<HttpResult>((resolve, reject) => {
          const req = request(new URL(ingressPath('worker-c', s.sessionId, 'offers'), t.plane.ingressUrl), {
            method: 'POST',
            agent,
            servername: 'localhost',
            headers: { 'content-type': 'application/json', 'transfer-encoding': 'chunked' },
          });
          req.on('error', reject);
          req.on('response', (res) => {
            let raw = '';
            res.on('data', (c: Buffer) => (raw += c.toString('utf8')));
            res.on('end', () =>
              resolve({ status: res.statusCode ?? 0, headers: res.headers, body: JSON.parse(raw), raw }),
            );
          });
          const payload = JSON.stringify({ ...valid(), pad: 'x'.repeat(bytes) });
          for (let i = 0; i < payload.length; i += 1024) req.write(payload.slice(i, i + 1024));
          req.end();
        });
      try {
        const before = t.statements();
        const results = [
          await t.ingress(s.creds, ingressPath('worker-c', s.sessionId, 'offers'), undefined, {
            rawBody: JSON.stringify({ ...valid(), pad: 'x'.repeat(4096) }),
          }),
          await chunked(5 * 1024),
          await chunked(80 * 1024),
        ];
        expect(t.statements()).toBe(before);
        for (const res of results) {
          expect(res.status).toBe(413);
          expect(res.body).toEqual({ code: 'worker_request_too_large', message: expect.any(String) });
        }
      } finally {
        agent.destroy();
      }
    });
  });
});
