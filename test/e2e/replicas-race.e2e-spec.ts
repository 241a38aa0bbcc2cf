import { ingressPath } from '@ql/contracts';
import { newSessionId, registerBody } from '../support/fixtures';
import {
  TestDatabase,
  TestPlane,
  createTestDatabase,
  createTestPki,
  readPair,
  startTestPlane,
} from '../support/test-plane';

interface Registered {
  readonly sessionId: string;
  readonly generation: number;
  readonly version: number;
}

/** R-REG-7 / gate 1: two control-plane replicas on one PostgreSQL racing to replace the same worker. */
describe('two control-plane instances sharing one PostgreSQL', () => {
  let db: TestDatabase;
  let pki: Awaited<ReturnType<typeof createTestPki>>;
  const planes: TestPlane[] = [];

  beforeAll(async () => {
    db = await createTestDatabase('postgres');
    pki = await createTestPki(['worker-a']);
    const env = { QL_INGRESS_RATE_BURST: '100000', QL_DB_POOL_SIZE: '8' };
    // Each one kept as it starts, so a failed second start still closes the first (its queue
    // listener would otherwise reconnect after the file is torn down).
    for (let i = 0; i < 2; i++) planes.push(await startTestPlane(db, pki, env));
  });
  afterAll(async () => {
    for (const p of planes) await p.close();
    await db?.dispose();
    pki?.remove();
  });

  it('replace one worker 200 times concurrently: generations 1..200 without gap or duplicate; every older session gets 409', async () => {
    const creds = readPair(pki.workers['worker-a']!);
    const sessions = Array.from({ length: 200 }, () => newSessionId());
    const results = await Promise.all(
      sessions.map(async (sessionId, i) => {
        const res = await planes[i % 2]!.ingress(
          creds,
          ingressPath('worker-a', sessionId, 'register'),
          registerBody(),
        );
        expect(res.status).toBe(200);
        const body = res.body as { generation: number; version: number };
        return { sessionId, generation: body.generation, version: body.version } satisfies Registered;
      }),
    );
    const ordered = [...results].sort((a, b) => a.generation - b.generation);
    expect(ordered.map((r) => r.generation)).toEqual(Array.from({ length: 200 }, (_, i) => i + 1));
    for (let i = 1; i < ordered.length; i++)
      expect(ordered[i]!.version).toBeGreaterThan(ordered[i - 1]!.version);

    const heartbeat = (plane: TestPlane, r: Registered) =>
      plane.ingress(creds, ingressPath('worker-a', r.sessionId, 'heartbeat'), {
        generation: r.generation,
        expectedVersion: r.version,
        availableSlots: 1,
      });
    const stale = await Promise.all(ordered.slice(0, 199).map((r, i) => heartbeat(planes[i % 2]!, r)));
    for (const res of stale) {
      expect(res.status).toBe(409);
      expect(res.body).toMatchObject({ code: 'worker_session_fenced', reason: 'session_replaced' });
    }
    const latest = ordered[199]!;
    const live = await heartbeat(planes[1]!, latest);
    expect(live.status).toBe(200);

    // R-ID-4: a disable committed through one replica is refused by the other on its very next call.
    expect((await planes[0]!.admin('POST', '/api/v1/workers/worker-a/disable')).status).toBe(200);
    const next = { ...latest, version: (live.body as { version: number }).version };
    const refused = await heartbeat(planes[1]!, next);
    expect(refused.status).toBe(409);
    expect(refused.body).toMatchObject({ reason: 'worker_disabled' });
    const reRegister = await planes[1]!.ingress(
      creds,
      ingressPath('worker-a', newSessionId(), 'register'),
      registerBody(),
    );
    expect(reRegister.body).toMatchObject({ reason: 'worker_disabled' });
  });
});
