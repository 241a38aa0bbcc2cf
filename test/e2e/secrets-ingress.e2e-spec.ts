// ADR 0050 (issue 19 item 6) over the real mTLS ingress, both dialects: `secrets` serves the values
// only to the holder of a live lease of an attempt that started and whose revision maps them; every
// other caller — another worker, a replaced session, a released or finished lease, a call before
// `starting`, a run cancelled while starting — gets a refusal that holds no value.
import { randomBytes } from 'node:crypto';
import { ingressPath } from '@ql/contracts';
import { registerBody } from '../support/fixtures';
import { IngressSession, LeaseHolder, leaseFence, pullOffer, registerSession } from '../support/lease-holder';
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

const COOKIE_1 = `pt_key=${randomBytes(12).toString('hex')};`;
const COOKIE_2 = `pt_key=${randomBytes(12).toString('hex')};`;

describe.each<Dialect>(['sqlite', 'postgres'])('secrets over the mTLS ingress (%s)', (dialect) => {
  let db: TestDatabase;
  let pki: Awaited<ReturnType<typeof createTestPki>>;
  let t: TestPlane;
  let a: IngressSession;
  let b: IngressSession;
  let names = 0;

  const register = (workerId: string): Promise<IngressSession> =>
    registerSession(
      t,
      readPair(pki.workers[workerId]!),
      workerId,
      registerBody({ maxConcurrentRuns: 32, availableSlots: 32 }),
    );

  beforeAll(async () => {
    db = await createTestDatabase(dialect);
    pki = await createTestPki(['worker-a', 'worker-b']);
    t = await startTestPlane(db, pki, {
      QL_INGRESS_RATE_BURST: '100000',
      QL_SESSION_LEASE_MS: '600000',
      QL_SECRETS_KEY: randomBytes(32).toString('base64'),
    });
    for (const [name, value] of [
      ['c1', COOKIE_1],
      ['c2', COOKIE_2],
    ])
      expect((await t.admin('POST', '/api/v1/secrets', { name, value })).status).toBe(201);
    a = await register('worker-a');
    b = await register('worker-b');
  });
  afterAll(async () => {
    await t?.close();
    await db?.dispose();
    pki?.remove();
  });

  /** A new task's run (mapping JD_COOKIE to both secrets unless `secretEnv` says otherwise), pulled by `s`. */
  const hold = async (
    s: IngressSession,
    secretEnv: Record<string, string> | null = { JD_COOKIE: 'c1&c2' },
  ) => {
    const task = await t.admin('POST', '/api/v1/tasks', {
      name: `secrets ${dialect} ${++names}`,
      command: 'echo hello',
      runtime: 'shell',
      ...(secretEnv ? { secretEnv } : {}),
    });
    expect(task.status).toBe(201);
    const run = await t.admin('POST', `/api/v1/tasks/${(task.body as { id: string }).id}/runs`, {});
    expect(run.status).toBe(201);
    const held = await pullOffer(t, s);
    expect(held.offer.run.runId).toBe((run.body as { run: { id: string } }).run.id);
    return held;
  };
  const call = (s: IngressSession, action: 'starting' | 'secrets' | 'release', h: LeaseHolder) =>
    t.ingress(s.creds, ingressPath(s.workerId, s.sessionId, action), leaseFence(s, h));
  const refused = (res: HttpResult, code: string, reason: string) => {
    expect({
      status: res.status,
      code: (res.body as { code: string }).code,
      reason: (res.body as { reason?: string }).reason,
    }).toEqual({
      status: 409,
      code,
      reason,
    });
    expect(res.raw).not.toContain(COOKIE_1);
    expect(res.raw).not.toContain(COOKIE_2);
  };

  it('the holder gets the mapped values joined after starting; not before', async () => {
    const h = await hold(a);
    refused(await call(a, 'secrets', h), 'worker_lease_fenced', 'attempt_not_starting');
    expect((await call(a, 'starting', h)).status).toBe(200);
    const res = await call(a, 'secrets', h);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      attemptId: h.offer.run.attemptId,
      env: { JD_COOKIE: `${COOKIE_1}&${COOKIE_2}` },
    });
    // The offer itself held only the names.
    expect(JSON.stringify(h.offer)).not.toContain(COOKIE_1);
    expect(h.offer.execution.spec.secretEnv).toEqual({ JD_COOKIE: 'c1&c2' });
  });

  it('another worker with its own session and the holder’s fence is refused; naming the holder’s id with its certificate is 401', async () => {
    const h = await hold(a);
    expect((await call(a, 'starting', h)).status).toBe(200);
    // worker-b's own session fence with a's lease: the lease is not b's.
    refused(await call(b, 'secrets', h), 'worker_lease_fenced', 'lease_token_mismatch');
    const stolen = await t.ingress(
      b.creds,
      ingressPath(a.workerId, a.sessionId, 'secrets'),
      leaseFence(a, h),
    );
    expect(stolen.status).toBe(401);
    expect(stolen.raw).not.toContain(COOKIE_1);
  });

  it('a released lease, and a replaced session, are refused', async () => {
    const released = await hold(a);
    expect((await call(a, 'release', released)).status).toBe(200);
    refused(await call(a, 'secrets', released), 'worker_lease_fenced', 'lease_not_active');
    // Its run is queued again: worker-a takes it back, so the next pulls get their own runs.
    expect((await pullOffer(t, a)).offer.run.runId).toBe(released.offer.run.runId);

    const s = await register('worker-b');
    const h = await hold(s);
    expect((await call(s, 'starting', h)).status).toBe(200);
    b = await register('worker-b'); // worker-b restarts: a new session replaces `s`
    refused(await call(s, 'secrets', h), 'worker_session_fenced', 'session_replaced');
  });

  it('a run cancelled while starting gets 422 secrets_unavailable (cancel_requested): no value served', async () => {
    const h = await hold(a);
    expect((await call(a, 'starting', h)).status).toBe(200);
    expect((await t.admin('POST', `/api/v1/runs/${h.offer.run.runId}/cancel`)).status).toBe(200);
    const res = await call(a, 'secrets', h);
    expect({
      status: res.status,
      code: (res.body as { code: string }).code,
      reason: (res.body as { reason?: string }).reason,
    }).toEqual({ status: 422, code: 'secrets_unavailable', reason: 'cancel_requested' });
    expect(res.raw).not.toContain(COOKIE_1);
    expect(res.raw).not.toContain(COOKIE_2);
  });

  it('an attempt whose revision maps no secret gets none', async () => {
    const h = await hold(a, null);
    expect((await call(a, 'starting', h)).status).toBe(200);
    const res = await call(a, 'secrets', h);
    expect(res).toMatchObject({ status: 200, body: { attemptId: h.offer.run.attemptId, env: {} } });
  });
});
