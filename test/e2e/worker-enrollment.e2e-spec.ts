/**
 * Joining (issue 18 §2, ADR 0045 §2): `POST /api/v3/worker-ingress/enroll` over TLS without a client
 * certificate, with real CSRs. Every refusal from the list writes nothing but its audit row
 * (a refused CSR leaves the token unused); the certificate issued registers a session over mTLS.
 */
import { X509Certificate } from 'node:crypto';
import { INGRESS_ENROLL_PATH, ingressPath } from '@ql/contracts';
import { changedTables, snapshotDatabase } from '../support/db-snapshot';
import { issuerEnv } from '../support/enrolled-worker';
import { CLIENT_AUTH, CsrKey, SERVER_AUTH, breakSignature, makeCsr } from '../support/csr';
import { newSessionId, registerBody } from '../support/fixtures';
import {
  Dialect,
  TRUST_DOMAIN,
  TestDatabase,
  TestPlane,
  createTestDatabase,
  createTestPki,
  startTestPlane,
} from '../support/test-plane';

type TestPki = Awaited<ReturnType<typeof createTestPki>>;
const uri = (workerId: string) => `spiffe://${TRUST_DOMAIN}/worker/${workerId}`;

describe.each<Dialect>(['sqlite', 'postgres'])('worker enrollment (%s)', (dialect) => {
  let db: TestDatabase;
  let pki: TestPki;
  let t: TestPlane;

  beforeAll(async () => {
    db = await createTestDatabase(dialect);
    pki = await createTestPki([]);
    t = await startTestPlane(db, pki, {
      ...issuerEnv(pki),
      QL_WORKER_CERT_TTL_MS: '300000',
    });
  });
  afterAll(async () => {
    await t?.close();
    await db?.dispose();
    pki?.remove();
  });

  const snapshot = () => snapshotDatabase(t.plane.core.db);
  const newToken = async (spec: Record<string, unknown>) => {
    const res = await t.admin('POST', '/api/v1/enrollment-tokens', spec);
    expect(res.status).toBe(201);
    return res.body as { id: string; token: string };
  };
  const enroll = (body: unknown) => t.ingress(null, INGRESS_ENROLL_PATH, body);

  /** Refused with `status` and `code`; the audit log gained exactly one row, and nothing else changed. */
  async function expectRefused(body: Record<string, unknown>, status: number, code: string, reason?: string) {
    const before = await snapshot();
    const res = await enroll(body);
    expect({ status: res.status, body: res.body }).toEqual({
      status,
      body: { code, message: expect.any(String), ...(reason ? { reason } : {}) },
    });
    const after = await snapshot();
    expect(changedTables(before, after)).toEqual(['audit_log']);
    expect(after.audit_log!.length - before.audit_log!.length).toBe(1);
    expect(JSON.stringify(after.audit_log)).not.toContain(String(body.token));
  }

  it('issues a certificate the existing identity rules accept: it registers a session over mTLS', async () => {
    const { token } = await newToken({ workerId: 'edge-1' });
    // A CSR may ask for exactly what the worker gets anyway: its own URI and clientAuth.
    const { csrPem, keyPem } = await makeCsr({ uris: [uri('edge-1')], extendedKeyUsages: [CLIENT_AUTH] });
    const before = await snapshot();
    const res = await enroll({ workerId: 'edge-1', token, csr: csrPem });
    expect(res.status).toBe(200);
    const answer = res.body as {
      certificatePem: string;
      chainPem: string;
      fingerprint: string;
      notAfter: string;
    };
    expect(changedTables(before, await snapshot())).toEqual([
      'audit_log',
      'enrollment_token_uses',
      'worker_certificates',
    ]);

    const cert = new X509Certificate(answer.certificatePem);
    const issuer = new X509Certificate(answer.chainPem);
    expect(cert.verify(issuer.publicKey) && cert.checkIssued(issuer)).toBe(true);
    expect(issuer.fingerprint256).toBe(t.plane.core.workerIssuer!.certificate.fingerprint256);
    expect(cert.subject).toBe('CN=edge-1');
    expect(cert.subjectAltName).toBe(`URI:${uri('edge-1')}`);
    expect(cert.keyUsage).toEqual([CLIENT_AUTH]);
    expect(cert.ca).toBe(false);
    expect(cert.serialNumber).toMatch(/^[0-9A-F]{32}$/);
    const lifetime = Date.parse(cert.validTo) - Date.parse(cert.validFrom);
    expect(lifetime).toBe(300_000 + 5 * 60_000); // QL_WORKER_CERT_TTL_MS, from now − 5 min
    expect(answer.fingerprint).toBe(cert.fingerprint256.replace(/:/g, '').toLowerCase());
    expect((await t.plane.core.repositories.workerCertificates.current('edge-1'))?.fingerprint).toBe(
      answer.fingerprint,
    );

    // The worker sends its certificate with the chain; the ingress trusts the root.
    const credentials = { certPem: answer.certificatePem + answer.chainPem, keyPem };
    const registered = await t.ingress(
      credentials,
      ingressPath('edge-1', newSessionId(), 'register'),
      registerBody(),
    );
    expect(registered.status).toBe(200);
    // Its identity is edge-1's and no other's.
    const other = await t.ingress(
      credentials,
      ingressPath('edge-2', newSessionId(), 'register'),
      registerBody(),
    );
    expect(other).toMatchObject({ status: 401, body: { code: 'worker_authentication_required' } });
  });

  it.each<CsrKey>(['P-384', 'Ed25519', 'RSA-2048'])('accepts a %s key', async (key) => {
    const workerId = `key-${key.toLowerCase()}`;
    const { token } = await newToken({ workerId });
    const res = await enroll({ workerId, token, csr: (await makeCsr({ key })).csrPem });
    expect(res.status).toBe(200);
  });

  it('refuses each bad token with its code, writing nothing but the audit row', async () => {
    const csr = (await makeCsr()).csrPem;
    // replay: the same worker id again with its token and another key
    const once = await newToken({ workerId: 'tok-1' });
    expect((await enroll({ workerId: 'tok-1', token: once.token, csr })).status).toBe(200);
    const otherKey = (await makeCsr()).csrPem;
    await expectRefused(
      { workerId: 'tok-1', token: once.token, csr: otherKey },
      409,
      'enrollment_token_used',
    );
    // a token for router-1 used by router-2
    const router1 = await newToken({ workerId: 'router-1' });
    await expectRefused(
      { workerId: 'router-2', token: router1.token, csr },
      403,
      'enrollment_token_wrong_worker',
    );
    // a pattern beyond its count
    const pattern = await newToken({ pattern: 'fleet-*', count: 1 });
    expect((await enroll({ workerId: 'fleet-1', token: pattern.token, csr })).status).toBe(200);
    await expectRefused(
      { workerId: 'fleet-2', token: pattern.token, csr },
      409,
      'enrollment_token_exhausted',
    );
    // revoked
    const revoked = await newToken({ workerId: 'tok-2' });
    expect((await t.admin('DELETE', `/api/v1/enrollment-tokens/${revoked.id}`)).status).toBe(200);
    await expectRefused({ workerId: 'tok-2', token: revoked.token, csr }, 403, 'enrollment_token_invalid');
    // expired (moved into the past in the database: the clock of the plane is the real one)
    const expired = await newToken({ workerId: 'tok-3' });
    await t.plane.core.db.run('UPDATE enrollment_tokens SET expires_at = {ms :at} WHERE id = :id', {
      id: expired.id,
      at: Date.now() - 1000,
    });
    await expectRefused({ workerId: 'tok-3', token: expired.token, csr }, 403, 'enrollment_token_invalid');
    // unknown
    await expectRefused(
      { workerId: 'tok-4', token: `qlet_${'A'.repeat(43)}`, csr },
      403,
      'enrollment_token_invalid',
    );
  });

  it('a lost answer: the used token with the same key gets the same certificate again, signing nothing; not once that certificate was replaced', async () => {
    const { token } = await newToken({ workerId: 'lost-1' });
    const csr = (await makeCsr()).csrPem;
    const first = await enroll({ workerId: 'lost-1', token, csr });
    expect(first.status).toBe(200);
    const before = await snapshot();
    const again = await enroll({ workerId: 'lost-1', token, csr });
    expect(again).toMatchObject({ status: 200, body: first.body as object });
    const after = await snapshot();
    expect(changedTables(before, after)).toEqual(['audit_log']);
    const added = after.audit_log!.filter((row) => !before.audit_log!.includes(row));
    // A replay is no refusal: its own row alone (the token's refusal is not written, issue 27 item 9).
    expect(added.map((row) => (JSON.parse(String(row)) as { action: string }).action)).toEqual([
      'enrollment.replay',
    ]);
    // A new enrollment of lost-1 (another token, another key) replaces it: the old key gets nothing.
    const second = await newToken({ workerId: 'lost-1' });
    expect(
      (await enroll({ workerId: 'lost-1', token: second.token, csr: (await makeCsr()).csrPem })).status,
    ).toBe(200);
    await expectRefused({ workerId: 'lost-1', token, csr }, 409, 'enrollment_token_used');
  });

  it('refuses each bad CSR with csr_refused and its reason, writing nothing but the audit row; the token stays good', async () => {
    const { token } = await newToken({ workerId: 'csr-1' });
    const cases: [string, Promise<string> | string, string][] = [
      [
        'extra SANs',
        makeCsr({ uris: [uri('csr-1')], dnsNames: ['csr-1.example'] }).then((c) => c.csrPem),
        'subject_alt_name',
      ],
      ["another id's URI", makeCsr({ uris: [uri('csr-2')] }).then((c) => c.csrPem), 'subject_alt_name'],
      ['CA:TRUE', makeCsr({ ca: true }).then((c) => c.csrPem), 'ca'],
      ['keyCertSign', makeCsr({ keyCertSign: true }).then((c) => c.csrPem), 'key_usage'],
      [
        'no clientAuth',
        makeCsr({ extendedKeyUsages: [SERVER_AUTH] }).then((c) => c.csrPem),
        'extended_key_usage',
      ],
      ['RSA-1024', makeCsr({ key: 'RSA-1024' }).then((c) => c.csrPem), 'weak_key'],
      ['a broken signature', makeCsr().then((c) => breakSignature(c.csrPem)), 'bad_signature'],
      [
        'PEM of garbage',
        '-----BEGIN CERTIFICATE REQUEST-----\nZ2FyYmFnZQ==\n-----END CERTIFICATE REQUEST-----\n',
        'not_a_csr',
      ],
      ['not PEM', 'hello', 'not_a_csr'],
    ];
    for (const [name, csr, reason] of cases) {
      const before = await snapshot();
      await expectRefused({ workerId: 'csr-1', token, csr: await csr }, 400, 'csr_refused', reason);
      const [entry] = await t.plane.core.repositories.audit.list(1);
      expect({ name, entry }).toMatchObject({
        name,
        entry: { action: 'enrollment.csr_refuse', detail: { reason } },
      });
      expect(before.enrollment_token_uses).toEqual((await snapshot()).enrollment_token_uses);
    }
    expect((await enroll({ workerId: 'csr-1', token, csr: (await makeCsr()).csrPem })).status).toBe(200);
  });

  it('refuses 64 KiB of garbage before reading it, and a body that breaks the DTO, writing nothing', async () => {
    const before = await snapshot();
    const garbage = await enroll({ workerId: 'big-1', token: 'x', csr: 'A'.repeat(64 * 1024) });
    expect(garbage).toMatchObject({ status: 413, body: { code: 'worker_request_too_large' } });
    const unknownField = await enroll({ workerId: 'big-1', token: 'x', csr: 'x', role: 'admin' });
    expect(unknownField).toMatchObject({ status: 400, body: { code: 'invalid_worker_request' } });
    const badId = await enroll({ workerId: 'Not An Id', token: 'x', csr: 'x' });
    expect(badId).toMatchObject({ status: 400, body: { code: 'invalid_worker_request' } });
    expect(await snapshot()).toEqual(before);
  });

  it('without an issuer answers 503 enrollment_disabled; the rate limit per source address comes first', async () => {
    const plain = await startTestPlane(db, pki, { QL_ENROLL_RATE_PER_MINUTE: '2' }, { seedKeys: false });
    try {
      const body = { workerId: 'off-1', token: `qlet_${'A'.repeat(43)}`, csr: (await makeCsr()).csrPem };
      const before = await snapshot();
      for (let i = 0; i < 2; i++) {
        const res = await plain.ingress(null, INGRESS_ENROLL_PATH, body);
        expect(res).toMatchObject({ status: 503, body: { code: 'enrollment_disabled' } });
      }
      const limited = await plain.ingress(null, INGRESS_ENROLL_PATH, body);
      expect(limited).toMatchObject({
        status: 429,
        body: { code: 'worker_rate_limited', retryAfterSeconds: 30 },
      });
      expect(limited.headers['retry-after']).toBe('30');
      expect(await snapshot()).toEqual(before);
    } finally {
      await plain.close();
    }
  });
});
