/**
 * Revoking a worker (issue 18 §6, ADR 0045 §6): `POST /api/v1/workers/{id}/revoke` revokes every
 * certificate issued to it, current and superseded, audited; two replicas on one database both
 * refuse them within QL_REVOCATION_CACHE_MS, and none renews. Another worker is untouched.
 */
import { ingressPath } from '@ql/contracts';
import { enrollWorker, issuerEnv, renewCertificate } from '../support/enrolled-worker';
import { newSessionId, registerBody } from '../support/fixtures';
import { eventually } from '../support/remote-run-harness';
import {
  Dialect,
  TestDatabase,
  TestPlane,
  createTestDatabase,
  createTestPki,
  startTestPlane,
} from '../support/test-plane';
import type { PemPair } from '../../apps/control-plane/src/pki';

type TestPki = Awaited<ReturnType<typeof createTestPki>>;
const CACHE_MS = 300;

describe.each<Dialect>(['sqlite', 'postgres'])('revoking a worker (%s)', (dialect) => {
  let db: TestDatabase;
  let pki: TestPki;
  let a: TestPlane;
  let b: TestPlane;

  beforeAll(async () => {
    db = await createTestDatabase(dialect);
    pki = await createTestPki([]);
    const env = {
      ...issuerEnv(pki),
      QL_REVOCATION_CACHE_MS: String(CACHE_MS),
      QL_INGRESS_RATE_BURST: '100000',
    };
    a = await startTestPlane(db, pki, env);
    b = await startTestPlane(db, pki, env, { seedKeys: false });
  });
  afterAll(async () => {
    await b?.close();
    await a?.close();
    await db?.dispose();
    pki?.remove();
  });

  const register = (t: TestPlane, workerId: string, credentials: PemPair) =>
    t.ingress(credentials, ingressPath(workerId, newSessionId(), 'register'), registerBody());

  it('revokes every certificate the worker was issued; both replicas refuse them within the cache window', async () => {
    const first = await enrollWorker(a, 'gone-1');
    const { credentials: current } = await renewCertificate(a, 'gone-1', first);
    const bystander = await enrollWorker(a, 'stays-1');
    // Both replicas have looked the current certificate up (their caches hold "not revoked").
    for (const t of [a, b]) expect((await register(t, 'gone-1', current!)).status).toBe(200);

    const noKey = await a.admin('POST', '/api/v1/workers/gone-1/revoke', undefined, a.viewerToken);
    expect(noKey.status).toBe(403); // admin role only
    const revokedAt = Date.now();
    const res = await a.admin('POST', '/api/v1/workers/gone-1/revoke');
    expect(res).toMatchObject({
      status: 200,
      body: { workerId: 'gone-1', fingerprints: [first.fingerprint, current!.fingerprint].sort() },
    });
    expect((await a.plane.core.repositories.audit.list(1))[0]).toMatchObject({
      action: 'worker.revoke',
      target: 'worker:gone-1',
      detail: { workerId: 'gone-1', fingerprints: [first.fingerprint, current!.fingerprint].sort() },
    });

    for (const t of [a, b]) {
      await eventually(
        'the revocation to reach this replica',
        async () => ((await register(t, 'gone-1', current!)).status === 401 ? true : undefined),
        { deadlineMs: CACHE_MS + 2000, pollMs: 20 },
      );
      expect(Date.now() - revokedAt).toBeLessThan(CACHE_MS + 2000);
      expect((await renewCertificate(t, 'gone-1', current!)).res).toMatchObject({
        status: 401,
        body: { code: 'certificate_revoked' },
      });
      expect((await register(t, 'stays-1', bystander)).status).toBe(200);
    }

    // Again: nothing left to revoke, still answered; an id never seen revokes nothing.
    expect((await a.admin('POST', '/api/v1/workers/gone-1/revoke')).body).toEqual({
      workerId: 'gone-1',
      fingerprints: [],
    });
    expect((await a.admin('POST', '/api/v1/workers/never-seen/revoke')).body).toEqual({
      workerId: 'never-seen',
      fingerprints: [],
    });
    // The machine enrolls again with a new token.
    const back = await enrollWorker(a, 'gone-1');
    expect((await register(b, 'gone-1', back)).status).toBe(200);
  });
});
