// Size: what test/e2e/activation-ingress.e2e-spec.ts does not cover of "a completion, activation or
// log chunk from a replaced session or with an old token is 409 and changes nothing": every lease
// call from a replaced session (by the old session, and under the new one), and activation and log
// calls under the token of a released lease; one running app per dialect.
import { IngressAction, ingressPath, parseActivationResponse } from '@ql/contracts';
import { snapshotDatabase } from '../support/db-snapshot';
import { newSessionId, registerBody } from '../support/fixtures';
import { IngressSession, LeaseHolder, leaseFence, pullNewRun, pullOffer } from '../support/lease-holder';
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

/** How far the holder got before the fence test: the lease version its next call carries. */
type Stage = 'held' | 'starting' | 'running';

/** The extra fields of each lease call (beside the fence). */
const CALLS: Record<
  'starting' | 'running' | 'start-failure' | 'logs' | 'completion',
  Record<string, unknown>
> = {
  starting: {},
  running: { executorHandle: 'pid:4242' },
  'start-failure': { errorCode: 'spawn_failed' },
  logs: { seq: 1, text: 'from a fenced holder\n' },
  completion: { outcome: 'succeeded', exitCode: 0 },
};
type Call = keyof typeof CALLS;

/** The stage each call is tried at: the one where it would be accepted from the rightful holder. */
const STAGE_OF: Record<Call, Stage> = {
  starting: 'held',
  running: 'starting',
  'start-failure': 'starting',
  logs: 'running',
  completion: 'running',
};

describe.each<Dialect>(['sqlite', 'postgres'])('fenced lease calls change nothing (%s)', (dialect) => {
  let db: TestDatabase;
  let pki: Awaited<ReturnType<typeof createTestPki>>;
  let t: TestPlane;
  let names = 0;

  beforeAll(async () => {
    db = await createTestDatabase(dialect);
    pki = await createTestPki(['worker-a']);
    t = await startTestPlane(db, pki, { QL_INGRESS_RATE_BURST: '100000', QL_SESSION_LEASE_MS: '600000' });
  });
  afterAll(async () => {
    await t?.close();
    await db?.dispose();
    pki?.remove();
  });

  const creds = () => readPair(pki.workers['worker-a']!);
  const send = (s: IngressSession, action: IngressAction, body: unknown) =>
    t.ingress(s.creds, ingressPath(s.workerId, s.sessionId, action), body);
  /** A new session of worker-a (it replaces the one before, if any). */
  const register = async (): Promise<IngressSession> => {
    const sessionId = newSessionId();
    const res = await t.ingress(creds(), ingressPath('worker-a', sessionId, 'register'), registerBody());
    expect(res.status).toBe(200);
    const { generation, version } = res.body as { generation: number; version: number };
    return { workerId: 'worker-a', sessionId, creds: creds(), generation, version };
  };
  const pull = (s: IngressSession) => pullOffer(t, s);
  /** A run of a new task pulled by `s`. */
  const holdNewRun = (s: IngressSession) => pullNewRun(t, s, `fences ${dialect} ${++names}`);
  /** Moves the holder's attempt to `stage`; the lease version its next call must carry. */
  const advance = async (s: IngressSession, h: LeaseHolder, stage: Stage): Promise<number> => {
    let version = 0;
    if (stage === 'held') return version;
    const starting = await send(s, 'starting', leaseFence(s, h, version));
    version = parseActivationResponse(starting.raw).snapshot.leaseVersion;
    if (stage === 'starting') return version;
    const running = await send(s, 'running', { ...leaseFence(s, h, version), ...CALLS.running });
    return parseActivationResponse(running.raw).snapshot.leaseVersion;
  };
  const refused = (res: HttpResult, code: string, reason: string) =>
    expect({ status: res.status, body: res.body }).toEqual({
      status: 409,
      body: { code, message: expect.any(String), reason },
    });
  const snapshot = () => snapshotDatabase(t.plane.core.db);

  /** The steps a successor session may send for its predecessor's lease (ADR 0015). */
  const SUCCESSOR_ENDS: readonly Call[] = ['start-failure', 'completion'];

  describe.each(Object.keys(CALLS) as Call[])('%s', (call) => {
    it('from a replaced session: refused to the old session; under the new one only an ending step is taken', async () => {
      const old = await register();
      const held = await holdNewRun(old);
      const version = await advance(old, held, STAGE_OF[call]);
      const current = await register();
      expect(current.generation).toBe(old.generation + 1);

      const unchanged = await snapshot();
      refused(
        await send(old, call, { ...leaseFence(old, held, version), ...CALLS[call] }),
        'worker_session_fenced',
        'session_replaced',
      );
      const underNew = await send(current, call, { ...leaseFence(current, held, version), ...CALLS[call] });
      if (SUCCESSOR_ENDS.includes(call)) {
        // ADR 0015: the worker's next session may end its predecessor's attempt with its token (restart
        // recovery), and nothing else; another call under the same lease is then refused as usual.
        expect({ status: underNew.status, answer: parseActivationResponse(underNew.raw).status }).toEqual({
          status: 200,
          answer: 'applied',
        });
        return;
      }
      // The new session of the same worker cannot carry on the old session's run (its token is bound to the old one).
      refused(underNew, 'worker_lease_fenced', 'lease_token_mismatch');
      expect(await snapshot()).toEqual(unchanged);
    });

    it('under the token of a released lease: refused, and nothing changes', async () => {
      const s = await register();
      const released = await holdNewRun(s);
      expect((await send(s, 'release', leaseFence(s, released))).status).toBe(200);
      // The same attempt again under a new offer, token and lease generation, at the call's stage.
      const current = await pull(s);
      expect(current.offer.run.attemptId).toBe(released.offer.run.attemptId);
      const version = await advance(s, current, STAGE_OF[call]);

      const unchanged = await snapshot();
      refused(
        await send(s, call, { ...leaseFence(s, released, version), ...CALLS[call] }),
        'worker_lease_fenced',
        'lease_not_active',
      );
      // The old token under the current lease's offer id and generation is no match either.
      refused(
        await send(s, call, {
          ...leaseFence(s, current, version),
          leaseToken: released.token,
          ...CALLS[call],
        }),
        'worker_lease_fenced',
        'lease_token_mismatch',
      );
      expect(await snapshot()).toEqual(unchanged);
    });
  });
});
