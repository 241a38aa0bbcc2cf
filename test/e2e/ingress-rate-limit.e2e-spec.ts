import { readFileSync } from 'node:fs';
import { IngressAction, ingressPath } from '@ql/contracts';
import {
  IngressCallError,
  WorkerIngressHttpsClient,
} from '../../apps/worker/src/ingress-client/worker-ingress-https.client';
import { newSessionId, registerBody } from '../support/fixtures';
import { prometheusSamples } from '../support/prometheus-text';
import { RemoteRunHarness } from '../support/remote-run-harness';
import {
  HttpResult,
  TestDatabase,
  TestPlane,
  createTestDatabase,
  createTestPki,
  readPair,
  startTestPlane,
} from '../support/test-plane';

/**
 * ADR 0042 over the real mTLS ingress: one bucket per worker across every route (the guard is made
 * once per Nest module, the limit is not), a 429 that says when to come back, counted in /metrics, and
 * a bucket sized from the slots the process learns from the register and heartbeat answers it serves.
 */
describe('ingress rate limit per worker (ADR 0042)', () => {
  let db: TestDatabase;
  let pki: Awaited<ReturnType<typeof createTestPki>>;
  const planes: TestPlane[] = [];

  beforeAll(async () => {
    db = await createTestDatabase('sqlite');
    pki = await createTestPki(['worker-a', 'worker-b', 'worker-c', 'worker-d']);
  });
  afterAll(async () => {
    for (const t of planes) await t.close();
    await db?.dispose();
    pki?.remove();
  });

  const start = async (env: Record<string, string>) => {
    const t = await startTestPlane(db, pki, env);
    planes.push(t);
    return t;
  };
  /** One call of `workerId` (its own certificate) on `action`; the body only has to pass the guard. */
  const caller = (t: TestPlane, workerId: string, sessionId = newSessionId()) => {
    const creds = readPair(pki.workers[workerId]!);
    return (action: IngressAction, body: unknown = {}) =>
      t.ingress(creds, ingressPath(workerId, sessionId, action), body);
  };
  const scrape = async (t: TestPlane) =>
    prometheusSamples((await t.admin('GET', '/metrics', undefined, t.viewerToken)).raw);
  const limited = (res: HttpResult) => {
    expect(res.status).toBe(429);
    expect(res.headers['retry-after']).toBe('1');
    expect(res.body).toEqual({
      code: 'worker_rate_limited',
      message: 'too many requests from this worker; retry after 1 s',
      retryAfterSeconds: 1,
    });
  };
  /** How many calls pass before the first 429 (at most `max`). */
  const passesBefore429 = async (call: () => Promise<HttpResult>, max: number) => {
    for (let n = 0; n < max; n++) if ((await call()).status === 429) return n;
    return max;
  };

  it('one bucket per worker across all its routes: emptied on one route, the next call on any other is 429 with Retry-After, counted by action, without a database statement', async () => {
    // A flat limit (no slot sizing): three calls, then one per second.
    const t = await start({
      QL_INGRESS_RATE_BURST: '3',
      QL_INGRESS_RATE_PER_SECOND: '1',
      QL_INGRESS_RATE_PER_SLOT: '0',
    });
    const a = caller(t, 'worker-a');
    const before = await scrape(t);
    const statuses = [];
    for (let i = 0; i < 3; i++) statuses.push((await a('register', registerBody())).status);
    expect(statuses).toEqual([200, 200, 200]);
    const statements = t.statements();
    // Each answered by another controller (activation, leases, session): each 429 from the one bucket.
    limited(await a('starting'));
    limited(await a('offers'));
    limited(await a('heartbeat'));
    expect(t.statements()).toBe(statements);
    // Another worker has its own bucket.
    expect((await caller(t, 'worker-b')('register', registerBody())).status).toBe(200);

    const after = await scrape(t);
    for (const action of ['starting', 'offers', 'heartbeat'])
      expect(
        (after.get(`ql_ingress_rate_limited_total{action="${action}"}`) ?? 0) -
          (before.get(`ql_ingress_rate_limited_total{action="${action}"}`) ?? 0),
      ).toBe(1);
    expect(after.has('ql_ingress_rate_limited_total{action="register"}')).toBe(false);
  });

  it("the worker's HTTPS client reads the 429's Retry-After", async () => {
    const t = await start({
      QL_INGRESS_RATE_BURST: '1',
      QL_INGRESS_RATE_PER_SECOND: '1',
      QL_INGRESS_RATE_PER_SLOT: '0',
    });
    const paths = pki.workers['worker-a']!;
    const client = new WorkerIngressHttpsClient({
      origins: [t.plane.ingressUrl],
      workerId: 'worker-a',
      credentials: () => ({
        certPem: readFileSync(paths.certPath),
        keyPem: readFileSync(paths.keyPath),
        caPem: readFileSync(pki.caCertPath),
      }),
    });
    try {
      const sessionId = newSessionId();
      await client.call('register', sessionId, registerBody());
      const refused = await client.call('register', sessionId, registerBody()).catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(IngressCallError);
      expect(refused).toMatchObject({ status: 429, code: 'worker_rate_limited', retryAfterMs: 1000 });
    } finally {
      await client.close();
    }
  });

  it('the bucket grows with the slots the register answer names: a 4-slot worker gets what a 1-slot one does not', async () => {
    // Unknown worker (one slot): 1/s, burst 2. Known with 4 slots: 4/s, burst 8 (topped up at once).
    const t = await start({
      QL_INGRESS_RATE_BURST: '2',
      QL_INGRESS_RATE_PER_SECOND: '1',
      QL_INGRESS_RATE_PER_SLOT: '1',
    });
    const four = caller(t, 'worker-a');
    expect((await four('register', registerBody({ maxConcurrentRuns: 4, availableSlots: 4 }))).status).toBe(
      200,
    );
    const one = caller(t, 'worker-b');
    expect((await one('register', registerBody({ maxConcurrentRuns: 1, availableSlots: 1 }))).status).toBe(
      200,
    );
    // After the register: 8 - 1 tokens for the 4-slot worker, 2 - 1 for the 1-slot one (plus refill).
    expect(await passesBefore429(() => four('offers'), 20)).toBeGreaterThanOrEqual(7);
    expect(await passesBefore429(() => one('offers'), 20)).toBeLessThanOrEqual(2);
  });

  it('a replica that did not serve the register learns the slots from the heartbeat answer it serves', async () => {
    const env = {
      QL_INGRESS_RATE_BURST: '2',
      QL_INGRESS_RATE_PER_SECOND: '1',
      QL_INGRESS_RATE_PER_SLOT: '1',
    };
    const first = await start(env);
    const second = await start(env);
    const sessionId = newSessionId();
    const registered = await caller(first, 'worker-c', sessionId)('register', registerBody());
    expect(registered.status).toBe(200);
    const onSecond = caller(second, 'worker-c', sessionId);
    const beat = await onSecond('heartbeat', { generation: 1, expectedVersion: 0, availableSlots: 4 });
    expect(beat.status).toBe(200);
    expect(await passesBefore429(() => onSecond('offers'), 20)).toBeGreaterThanOrEqual(7);
    // A worker the second replica has only seen call (no session answer): the one-slot default.
    expect(await passesBefore429(() => caller(second, 'worker-d')('offers'), 20)).toBeLessThanOrEqual(2);
  });
});

describe('a worker process over its rate limit (ADR 0042)', () => {
  let h: RemoteRunHarness;
  afterAll(() => h?.close());

  it('runs its tasks through the 429s, logs one warning for the burst and one line with its count when it is over', async () => {
    // A flat 4 calls per second: a one-slot worker running short tasks back to back asks for far more.
    h = await RemoteRunHarness.start('sqlite', ['worker-a'], {
      QL_INGRESS_RATE_BURST: '4',
      QL_INGRESS_RATE_PER_SECOND: '4',
      QL_INGRESS_RATE_PER_SLOT: '0',
    });
    const w = h.startWorker('worker-a', { env: { QL_WORKER_HEARTBEAT_MS: '1000' } });
    await h.untilOnline(w);
    const task = await h.createTask({ command: 'true', runtime: 'shell' });
    const runs = [];
    for (let i = 0; i < 8; i++) runs.push(await h.trigger(task));
    for (const runId of runs) expect((await h.untilRunEnds(runId)).status).toBe('succeeded');
    // Over: the first answer at least 5 s after the last 429 (heartbeats go on every second).
    const over = await w.until('the burst is over', async () =>
      w.lines.find((l) => l.msg === 'control plane rate limit over'),
    );
    const metrics = prometheusSamples((await h.t.admin('GET', '/metrics', undefined, h.t.viewerToken)).raw);
    const refusedByPlane = [...metrics]
      .filter(([key]) => key.startsWith('ql_ingress_rate_limited_total{'))
      .reduce((sum, [, n]) => sum + n, 0);
    expect(over.refusals).toBe(refusedByPlane);
    expect(refusedByPlane).toBeGreaterThan(1);
    // Besides the start-up advice about QL_WORKER_RUN_AS, the burst's one line: no pull, heartbeat or
    // renewal failure, no line per refused call.
    const warnings = w.lines
      .filter((l) => l.level === 'warn' && !String(l.msg).startsWith('tasks run as'))
      .map((l) => l.msg);
    expect(warnings).toEqual(['control plane rate-limits this worker; its calls wait as Retry-After says']);
  });
});
