import { X509Certificate } from 'node:crypto';
import { ingressPath } from '@ql/contracts';
import { DevPkiPaths, PemPair } from '../../apps/control-plane/src/pki';
import { snapshotDatabase } from '../support/db-snapshot';
import { ManualClock, newSessionId, registerBody } from '../support/fixtures';
import {
  Dialect,
  TRUST_DOMAIN,
  TestDatabase,
  TestPlane,
  createTestDatabase,
  createTestPki,
  createWorkerCert,
  readPair,
  startTestPlane,
} from '../support/test-plane';

type TestPki = DevPkiPaths & { remove(): void; caPair(): PemPair };
interface Live {
  readonly sessionId: string;
  readonly generation: number;
  version: number;
}

const heartbeat = (t: TestPlane, creds: PemPair, workerId: string, live: Live) =>
  t.ingress(creds, ingressPath(workerId, live.sessionId, 'heartbeat'), {
    generation: live.generation,
    expectedVersion: live.version,
    availableSlots: 1,
  });

async function registerLive(
  t: TestPlane,
  creds: PemPair,
  workerId: string,
  protocolVersion = 4,
): Promise<Live> {
  const sessionId = newSessionId();
  const res = await t.ingress(
    creds,
    ingressPath(workerId, sessionId, 'register'),
    registerBody({ protocolVersion }),
  );
  expect(res.status).toBe(200);
  const body = res.body as { generation: number; version: number };
  return { sessionId, generation: body.generation, version: body.version };
}

/** R-ID-2: what TLS (OpenSSL's ssl_client purpose) lets through, the principal guard still refuses. */
describe.each<Dialect>(['sqlite', 'postgres'])('worker certificate strictness (%s)', (dialect) => {
  let db: TestDatabase;
  let pki: TestPki;
  let t: TestPlane;

  beforeAll(async () => {
    db = await createTestDatabase(dialect);
    pki = await createTestPki(['worker-a', 'worker-b']);
    t = await startTestPlane(db, pki, { QL_INGRESS_RATE_BURST: '100000' });
  });
  afterAll(async () => {
    await t?.close();
    await db?.dispose();
    pki?.remove();
  });

  /** A refusal at the edge: 401, not one statement, nothing written. */
  async function expectRefused(cert: PemPair, path: string, body: unknown): Promise<void> {
    const before = t.statements();
    const res = await t.ingress(cert, path, body);
    expect(res.status).toBe(401);
    expect(res.body).toEqual({ code: 'worker_authentication_required', message: expect.any(String) });
    expect(t.statements()).toBe(before);
  }

  it.each([
    ['with keyCertSign', true],
    ['without keyCertSign (OpenSSL calls it "not a CA")', false],
  ])(
    'a leaf with basicConstraints CA:TRUE %s neither replaces nor speaks for the live session',
    async (_name, keyCertSign) => {
      const workerA = readPair(pki.workers['worker-a']!);
      const live = await registerLive(t, workerA, 'worker-a');
      const caLeaf = await createWorkerCert(pki.caPair(), {
        workerId: 'worker-a',
        trustDomain: TRUST_DOMAIN,
        isCa: true,
        keyCertSign,
      });
      const before = await snapshotDatabase(t.plane.core.db);

      await expectRefused(caLeaf, ingressPath('worker-a', newSessionId(), 'register'), registerBody());
      await expectRefused(caLeaf, ingressPath('worker-a', live.sessionId, 'heartbeat'), {
        generation: live.generation,
        expectedVersion: live.version,
        availableSlots: 1,
      });

      expect(await snapshotDatabase(t.plane.core.db)).toEqual(before);
      const still = await heartbeat(t, workerA, 'worker-a', live);
      expect(still.status).toBe(200);
      expect(still.body).toMatchObject({ generation: live.generation, version: live.version + 1 });
    },
  );

  it('a certificate without any Extended Key Usage passes TLS but is refused (401, zero statements)', async () => {
    const noEku = await createWorkerCert(pki.caPair(), {
      workerId: 'worker-b',
      trustDomain: TRUST_DOMAIN,
      clientAuth: 'none',
    });
    const before = await snapshotDatabase(t.plane.core.db);
    await expectRefused(noEku, ingressPath('worker-b', newSessionId(), 'register'), registerBody());
    expect(await snapshotDatabase(t.plane.core.db)).toEqual(before);
  });
});

const CACHE_MS = 2_000;

/**
 * R-ID-4 on two replicas of one database: a revoked certificate is served at most QL_REVOCATION_CACHE_MS
 * after each replica last looked, then refused by both. The window is far below the session lease,
 * so moving the clock through it changes nothing but the revocation verdict.
 */
describe.each<Dialect>(['sqlite', 'postgres'])('certificate revocation on two replicas (%s)', (dialect) => {
  let db: TestDatabase;
  let pki: TestPki;
  let planes: TestPlane[];
  const clock = new ManualClock(Date.now());

  beforeAll(async () => {
    db = await createTestDatabase(dialect);
    pki = await createTestPki(['worker-a', 'worker-b', 'worker-v1']);
    const env = {
      QL_INGRESS_RATE_BURST: '100000',
      QL_REVOCATION_CACHE_MS: String(CACHE_MS),
      QL_SESSION_LEASE_MS: '600000',
    };
    planes = [await startTestPlane(db, pki, env, { clock })];
    planes.push(await startTestPlane(db, pki, env, { clock }));
  });
  afterAll(async () => {
    for (const p of planes ?? []) await p.close();
    await db?.dispose();
    pki?.remove();
  });

  it('a revoked certificate is served inside QL_REVOCATION_CACHE_MS and refused right after, by both replicas', async () => {
    const [one, two] = planes as [TestPlane, TestPlane];
    const workerA = readPair(pki.workers['worker-a']!);
    const workerB = readPair(pki.workers['worker-b']!);
    const a = await registerLive(one, workerA, 'worker-a');
    const b = await registerLive(two, workerB, 'worker-b');
    // Both replicas look the certificates up now and remember them as not revoked.
    const beat = async (t: TestPlane, creds: PemPair, workerId: string, live: Live) => {
      const res = await heartbeat(t, creds, workerId, live);
      if (res.status === 200) live.version = (res.body as { version: number }).version;
      return res;
    };
    for (const t of [one, two]) {
      expect((await beat(t, workerA, 'worker-a', a)).status).toBe(200);
      expect((await beat(t, workerB, 'worker-b', b)).status).toBe(200);
    }

    const revoked = await one.admin('POST', '/api/v1/certificates/revoke', {
      fingerprint: new X509Certificate(workerA.certPem).fingerprint256,
    });
    expect(revoked.status).toBe(200);

    clock.advance(CACHE_MS - 1);
    for (const t of [one, two]) expect((await beat(t, workerA, 'worker-a', a)).status).toBe(200);

    clock.advance(1);
    for (const t of [one, two]) {
      const refused = await beat(t, workerA, 'worker-a', a);
      expect(refused.status).toBe(401);
      expect(refused.body).toEqual({
        code: 'certificate_revoked',
        message: expect.stringMatching(/revoked/),
      });
      // Only the revoked certificate: the other worker's session goes on.
      expect((await beat(t, workerB, 'worker-b', b)).status).toBe(200);
    }
  });

  it('a v1 session (protocol 3) whose certificate is revoked gets v1: 401 worker_authentication_required, on the replica it registered with and on the other (ADR 0062 §7)', async () => {
    const [one, two] = planes as [TestPlane, TestPlane];
    const creds = readPair(pki.workers['worker-v1']!);
    const live = await registerLive(one, creds, 'worker-v1', 3);
    expect((await heartbeat(two, creds, 'worker-v1', live)).status).toBe(200);
    const revoked = await one.admin('POST', '/api/v1/certificates/revoke', {
      fingerprint: new X509Certificate(creds.certPem).fingerprint256,
    });
    expect(revoked.status).toBe(200);
    clock.advance(CACHE_MS);
    // `one` remembers the session's version from its register; `two` reads it from the worker's row.
    for (const t of [one, two]) {
      const refused = await heartbeat(t, creds, 'worker-v1', live);
      expect({ status: refused.status, code: (refused.body as { code: string }).code }).toEqual({
        status: 401,
        code: 'worker_authentication_required',
      });
    }
  });
});
