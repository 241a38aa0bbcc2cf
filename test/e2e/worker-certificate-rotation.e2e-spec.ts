/**
 * Rotation and one current certificate per worker (issue 18 §3–§4, ADR 0045): renewing over mTLS
 * supersedes the certificate presented; the same key sent again is a replay; a superseded certificate
 * neither renews nor registers (a fork: 409, audit, metric) but keeps serving its session; a disabled
 * worker, a revoked or deleted worker's certificate and one not issued here do not renew.
 */
import { ingressPath } from '@ql/contracts';
import { LevelledLog } from '../support/captured-log';
import { changedTables, snapshotDatabase } from '../support/db-snapshot';
import { enrollWorker, issuerEnv, renewCertificate } from '../support/enrolled-worker';
import { newSessionId, registerBody } from '../support/fixtures';
import {
  Dialect,
  TestDatabase,
  TestPlane,
  createTestDatabase,
  createTestPki,
  readPair,
  startTestPlane,
} from '../support/test-plane';
import type { PemPair } from '../../apps/control-plane/src/pki';

type TestPki = Awaited<ReturnType<typeof createTestPki>>;

describe.each<Dialect>(['sqlite', 'postgres'])('worker certificate rotation (%s)', (dialect) => {
  let db: TestDatabase;
  let pki: TestPki;
  let t: TestPlane;

  beforeAll(async () => {
    db = await createTestDatabase(dialect);
    pki = await createTestPki(['hand-made']);
    t = await startTestPlane(db, pki, {
      ...issuerEnv(pki),
      QL_INGRESS_RATE_BURST: '100000',
      QL_REVOCATION_CACHE_MS: '0',
    });
  });
  afterAll(async () => {
    await t?.close();
    await db?.dispose();
    pki?.remove();
  });

  const snapshot = () => snapshotDatabase(t.plane.core.db);
  const register = (workerId: string, credentials: PemPair, sessionId = newSessionId()) =>
    t.ingress(credentials, ingressPath(workerId, sessionId, 'register'), registerBody());
  const forks = async () => {
    const text = (await t.admin('GET', '/metrics', undefined, t.viewerToken)).raw;
    return Number(/^ql_worker_certificate_forks_total (\d+)$/m.exec(text)?.[1] ?? 'NaN');
  };
  const lastAudit = async () => (await t.plane.core.repositories.audit.list(1))[0];

  it('renewing supersedes; the new certificate registers, the old one keeps its session', async () => {
    const first = await enrollWorker(t, 'rot-1');
    const sessionId = newSessionId();
    const registered = await register('rot-1', first, sessionId);
    expect(registered.status).toBe(200);
    let { res, credentials: second } = await renewCertificate(t, 'rot-1', first);
    expect(res.status).toBe(200);
    expect(await t.plane.core.repositories.workerCertificates.find(first.fingerprint)).toMatchObject({
      supersededBy: second!.fingerprint,
    });
    // The session it holds goes on (a renewal never interrupts runs) ...
    const beat = await t.ingress(first, ingressPath('rot-1', sessionId, 'heartbeat'), {
      generation: (registered.body as { generation: number }).generation,
      expectedVersion: (registered.body as { version: number }).version,
      availableSlots: 1,
    });
    expect(beat.status).toBe(200);
    // ... and three rotations in a row each give the next current certificate, which registers.
    for (let i = 0; i < 3; i++) {
      ({ res, credentials: second } = await renewCertificate(t, 'rot-1', second!));
      expect(res.status).toBe(200);
    }
    // The admin view names the certificate it holds now, not the one its session registered with.
    const view = await t.admin('GET', '/api/v1/workers/rot-1');
    expect((view.body as { certificateFingerprint: string }).certificateFingerprint).toBe(
      second!.fingerprint,
    );
    expect((await register('rot-1', second!)).status).toBe(200);
    expect((await t.plane.core.repositories.workerCertificates.current('rot-1'))?.fingerprint).toBe(
      second!.fingerprint,
    );
  });

  it('the same CSR again with the old certificate is a replay: the same certificate, nothing written', async () => {
    const first = await enrollWorker(t, 'rot-2');
    const renewal = await renewCertificate(t, 'rot-2', first);
    const before = await snapshot();
    const again = await renewCertificate(t, 'rot-2', first, renewal.csr);
    expect(again.res.status).toBe(200);
    expect(again.credentials!.fingerprint).toBe(renewal.credentials!.fingerprint);
    expect(await snapshot()).toEqual(before);
  });

  it('a second machine with a copy renews first: the original can neither renew nor register, audited and counted', async () => {
    const original = await enrollWorker(t, 'rot-3');
    const copy = { ...original }; // the same files on another machine
    const stolen = await renewCertificate(t, 'rot-3', copy);
    expect(stolen.res.status).toBe(200);
    const forksBefore = await forks();

    let before = await snapshot();
    const renew = await renewCertificate(t, 'rot-3', original);
    expect(renew.res).toMatchObject({ status: 409, body: { code: 'certificate_superseded' } });
    expect(changedTables(before, await snapshot())).toEqual(['audit_log']);
    expect(await lastAudit()).toMatchObject({
      action: 'worker.certificate_fork',
      detail: { presented: original.fingerprint, current: stolen.credentials!.fingerprint, on: 'renew' },
    });

    before = await snapshot();
    const reg = await register('rot-3', original);
    expect(reg).toMatchObject({ status: 409, body: { code: 'certificate_superseded' } });
    expect(changedTables(before, await snapshot())).toEqual(['audit_log']);
    expect(await lastAudit()).toMatchObject({
      action: 'worker.certificate_fork',
      detail: { presented: original.fingerprint, current: stolen.credentials!.fingerprint, on: 'register' },
    });
    expect(await forks()).toBe(forksBefore + 2);
  });

  it('a disabled worker does not renew; the audit row is all that is written', async () => {
    const creds = await enrollWorker(t, 'rot-4');
    expect((await register('rot-4', creds)).status).toBe(200);
    expect((await t.admin('POST', '/api/v1/workers/rot-4/disable')).status).toBe(200);
    const before = await snapshot();
    const { res } = await renewCertificate(t, 'rot-4', creds);
    expect(res).toMatchObject({ status: 403, body: { code: 'worker_disabled' } });
    expect(changedTables(before, await snapshot())).toEqual(['audit_log']);
  });

  it('a revoked certificate and a deleted worker’s certificate do not renew', async () => {
    const revoked = await enrollWorker(t, 'rot-5');
    const res = await t.admin('POST', '/api/v1/certificates/revoke', { fingerprint: revoked.fingerprint });
    expect(res.status).toBe(200);
    expect((await renewCertificate(t, 'rot-5', revoked)).res).toMatchObject({
      status: 401,
      body: { code: 'certificate_revoked' },
    });

    const deleted = await enrollWorker(t, 'rot-6');
    expect((await register('rot-6', deleted)).status).toBe(200);
    expect((await t.admin('POST', '/api/v1/workers/rot-6/disable')).status).toBe(200);
    expect((await t.admin('DELETE', '/api/v1/workers/rot-6')).status).toBe(200);
    expect(
      (await t.plane.core.repositories.workerCertificates.find(deleted.fingerprint))?.revokedAt,
    ).not.toBeNull();
    expect((await renewCertificate(t, 'rot-6', deleted)).res).toMatchObject({ status: 401 });
  });

  it('a certificate not issued here (hand-made) does not renew: enroll instead', async () => {
    const before = await snapshot();
    const { res } = await renewCertificate(t, 'hand-made', readPair(pki.workers['hand-made']!));
    expect(res).toMatchObject({ status: 403, body: { code: 'certificate_unknown' } });
    expect(changedTables(before, await snapshot())).toEqual(['audit_log']);
  });

  it('a plane without an issuer answers renewals 503 enrollment_disabled: one warning, no error per call, nothing written', async () => {
    const log = new LevelledLog();
    const plain = await startTestPlane(
      db,
      pki,
      { QL_INGRESS_RATE_BURST: '100000' },
      { seedKeys: false, logger: log },
    );
    try {
      const before = await snapshot();
      for (let i = 0; i < 3; i++) {
        const { res } = await renewCertificate(plain, 'hand-made', readPair(pki.workers['hand-made']!));
        expect(res).toMatchObject({ status: 503, body: { code: 'enrollment_disabled' } });
      }
      expect(log.at('error')).toEqual([]);
      expect(log.at('warn')).toEqual([expect.stringContaining('enrollment_disabled')]);
      expect(await snapshot()).toEqual(before);
    } finally {
      await plain.close();
    }
  });
});
