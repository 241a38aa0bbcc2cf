/**
 * The worker's certificate keeper (ADR 0045 §2–§4) against a real control plane over real TLS, in
 * this process so a crash can be placed exactly: what the enrollment request carries (the worker
 * id, the token and a CSR over the worker's own key: never the key), a renewal whose answer never
 * landed (crash between the pending key and the rename: the next start replays the same key and
 * gets the same certificate, no fork), and a crash between the two renames.
 */
import { X509Certificate, createPrivateKey, createPublicKey } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadWorkerConfig } from '../../apps/worker/src/config/worker-config';
import { CertificateCalls, CertificateKeeper } from '../../apps/worker/src/identity/certificate-keeper';
import { fileCredentials } from '../../apps/worker/src/ingress-client/file-credentials';
import {
  IngressCallError,
  WorkerIngressHttpsClient,
} from '../../apps/worker/src/ingress-client/worker-ingress-https.client';
import { JsonLineLog } from '../../apps/worker/src/logging/worker-log';
import { loadX509 } from '../../apps/control-plane/src/pki';
import { issuerEnv } from '../support/enrolled-worker';
import {
  Dialect,
  TestDatabase,
  TestPlane,
  createTestDatabase,
  createTestPki,
  startTestPlane,
} from '../support/test-plane';

type TestPki = Awaited<ReturnType<typeof createTestPki>>;

describe.each<Dialect>(['sqlite', 'postgres'])('worker certificate keeper (%s)', (dialect) => {
  let db: TestDatabase;
  let pki: TestPki;
  let t: TestPlane;
  let dir: string;

  beforeAll(async () => {
    db = await createTestDatabase(dialect);
    pki = await createTestPki(['keep-hand']);
    t = await startTestPlane(db, pki, { ...issuerEnv(pki), QL_INGRESS_RATE_BURST: '100000' });
    dir = mkdtempSync(join(tmpdir(), 'ql-keeper-'));
  });
  afterAll(async () => {
    await t?.close();
    await db?.dispose();
    pki?.remove();
    rmSync(dir, { recursive: true, force: true });
  });

  const token = async (workerId: string) =>
    ((await t.admin('POST', '/api/v1/enrollment-tokens', { workerId })).body as { token: string }).token;
  const forks = async () => {
    const text = (await t.admin('GET', '/metrics', undefined, t.viewerToken)).raw;
    return Number(/^ql_worker_certificate_forks_total (\d+)$/m.exec(text)?.[1] ?? 'NaN');
  };
  const fingerprintOf = (path: string) =>
    new X509Certificate(readFileSync(path)).fingerprint256.replaceAll(':', '').toLowerCase();

  /** A worker's keeper and client over its files; `wrap` sits between them (a recorder, a crash). */
  const keeperFor = (
    workerId: string,
    enrollToken = '',
    wrap?: (calls: CertificateCalls) => CertificateCalls,
    files?: { certPath: string; keyPath: string },
    now?: () => number,
  ) => {
    const config = loadWorkerConfig({
      QL_WORKER_ID: workerId,
      QL_WORKER_CONTROL_PLANE_URL: t.plane.ingressUrl,
      QL_WORKER_TLS_CA: pki.caCertPath,
      QL_WORKER_TLS_CERT: files?.certPath ?? join(dir, workerId, 'worker.crt'),
      QL_WORKER_TLS_KEY: files?.keyPath ?? join(dir, workerId, 'worker.key'),
      QL_WORKER_ENROLL_TOKEN: enrollToken,
    });
    const credentials = fileCredentials({
      caPath: config.tlsCaPath,
      certPath: config.tlsCertPath,
      keyPath: config.tlsKeyPath,
    });
    const client = new WorkerIngressHttpsClient({
      origins: config.controlPlaneOrigins,
      workerId,
      credentials,
    });
    const calls: CertificateCalls = {
      enroll: (body, ca, options) => client.enroll(body, ca, options),
      renewCertificate: (body, options) => client.renewCertificate(body, options),
    };
    const lines: string[] = [];
    const keeper = new CertificateKeeper(
      config,
      wrap ? wrap(calls) : calls,
      () => credentials.recheck(),
      new JsonLineLog('debug', (l) => lines.push(l)),
      now,
    );
    return { keeper, config, client, lines };
  };

  /** Enrolls `workerId` through a keeper, as a worker's first start does; its settings. */
  const enrolled = async (workerId: string) => {
    const { keeper, client, config } = keeperFor(workerId, await token(workerId));
    await keeper.prepare(new AbortController().signal);
    await client.close();
    return config;
  };

  it('enrolls with the worker id, the token and a CSR over its own key, nothing more', async () => {
    const secret = await token('keep-join');
    const sent: unknown[] = [];
    const { keeper, config, client, lines } = keeperFor('keep-join', secret, (calls) => ({
      ...calls,
      enroll: (body, ca, options) => {
        sent.push(body);
        return calls.enroll(body, ca, options);
      },
    }));
    await keeper.prepare(new AbortController().signal);
    await client.close();
    expect(sent).toHaveLength(1);
    const body = sent[0] as Record<string, string>;
    expect(Object.keys(body).sort()).toEqual(['csr', 'token', 'workerId']);
    expect({ workerId: body.workerId, token: body.token }).toEqual({ workerId: 'keep-join', token: secret });
    const keyPem = readFileSync(config.tlsKeyPath, 'utf8');
    const keyBase64 = keyPem.split('\n').slice(1, -2).join('');
    expect(JSON.stringify(body)).not.toContain(keyBase64.slice(0, 40));
    const x509 = loadX509();
    const csr = new x509.Pkcs10CertificateRequest(body.csr!);
    expect(await csr.verify()).toBe(true);
    expect(Buffer.from(csr.publicKey.rawData)).toEqual(
      createPublicKey(createPrivateKey(keyPem)).export({ type: 'spki', format: 'der' }),
    );
    expect(lines.join('\n')).not.toContain(secret);
    expect(existsSync(`${config.tlsKeyPath}.pending`)).toBe(false);
  });

  it('a renewal whose answer never landed is replayed at the next start: the same certificate, no fork', async () => {
    await enrolled('keep-crash');
    let answered: { fingerprint: string } | undefined;
    const {
      keeper: crashing,
      config,
      client: c2,
    } = keeperFor('keep-crash', '', (calls) => ({
      ...calls,
      renewCertificate: async (body, options) => {
        answered = (await calls.renewCertificate(body, options)) as { fingerprint: string };
        throw new Error('the process died before it wrote the answer');
      },
    }));
    const before = fingerprintOf(config.tlsCertPath);
    await expect(crashing.prepare(new AbortController().signal)).rejects.toThrow('the process died');
    await c2.close();
    expect(answered?.fingerprint).toMatch(/^[0-9a-f]{64}$/);
    expect(existsSync(`${config.tlsKeyPath}.pending`)).toBe(true);
    expect(fingerprintOf(config.tlsCertPath)).toBe(before);
    const pendingKey = readFileSync(`${config.tlsKeyPath}.pending`, 'utf8');
    const forksBefore = await forks();

    const { keeper: restarted, client: c3 } = keeperFor('keep-crash');
    await restarted.prepare(new AbortController().signal);
    await c3.close();
    expect(fingerprintOf(config.tlsCertPath)).toBe(answered!.fingerprint);
    expect(readFileSync(config.tlsKeyPath, 'utf8')).toBe(pendingKey);
    expect(existsSync(`${config.tlsKeyPath}.pending`)).toBe(false);
    expect(await forks()).toBe(forksBefore);
  });

  it('a crash between the two renames: the next start puts the pending key in place and renews', async () => {
    await enrolled('keep-rename');
    let answer: { certificatePem: string; chainPem: string } | undefined;
    const {
      keeper: crashing,
      config,
      client: c2,
    } = keeperFor('keep-rename', '', (calls) => ({
      ...calls,
      renewCertificate: async (body, options) => {
        answer = (await calls.renewCertificate(body, options)) as typeof answer;
        throw new Error('the process died between the renames');
      },
    }));
    await expect(crashing.prepare(new AbortController().signal)).rejects.toThrow('between the renames');
    await c2.close();
    writeFileSync(config.tlsCertPath, answer!.certificatePem + answer!.chainPem); // the first rename happened
    const forksBefore = await forks();
    const { keeper: restarted, client: c3, lines } = keeperFor('keep-rename');
    await restarted.prepare(new AbortController().signal);
    await c3.close();
    expect(existsSync(`${config.tlsKeyPath}.pending`)).toBe(false);
    expect(lines.some((l) => l.includes('worker certificate renewed'))).toBe(true);
    expect(await forks()).toBe(forksBefore);
  });

  it('refuses an answer for another worker or over another key, and writes nothing', async () => {
    await enrolled('keep-check');
    const other = readFileSync((await enrolled('keep-other')).tlsCertPath, 'utf8');
    for (const [what, change] of [
      ['another worker id', (a: Record<string, string>) => ({ ...a, workerId: 'keep-other' })],
      ['a certificate over another key', (a: Record<string, string>) => ({ ...a, certificatePem: other })],
    ] as const) {
      const { keeper, config, client } = keeperFor('keep-check', '', (calls) => ({
        ...calls,
        renewCertificate: async (body, options) =>
          change((await calls.renewCertificate(body, options)) as Record<string, string>),
      }));
      const before = readFileSync(config.tlsCertPath, 'utf8');
      await expect(keeper.prepare(new AbortController().signal)).rejects.toMatchObject({
        code: 'invalid_response',
      });
      await client.close();
      expect({ what, same: readFileSync(config.tlsCertPath, 'utf8') === before }).toEqual({
        what,
        same: true,
      });
      // The real worker's renewal of this pending key is still answered (a replay), so it is kept.
      expect(existsSync(`${config.tlsKeyPath}.pending`)).toBe(true);
    }
  });

  it('keeps a certificate the control plane did not issue (hand-made): not renewed, nothing written', async () => {
    const files = pki.workers['keep-hand']!;
    const before = readFileSync(files.certPath, 'utf8');
    const { keeper, client, lines } = keeperFor('keep-hand', '', undefined, files);
    await keeper.prepare(new AbortController().signal);
    await client.close();
    expect(readFileSync(files.certPath, 'utf8')).toBe(before);
    expect(existsSync(`${files.keyPath}.pending`)).toBe(false);
    expect(lines.some((l) => l.includes('certificate_unknown'))).toBe(true);
  });

  it('a renewal without an answer is sent again, the same CSR, with backoff, until it is answered', async () => {
    const config = await enrolled('keep-retry');
    const sent: string[] = [];
    const { keeper, client, lines } = keeperFor('keep-retry', '', (calls) => ({
      ...calls,
      renewCertificate: async (body, options) => {
        sent.push((body as { csr: string }).csr);
        if (sent.length <= 2)
          throw new IngressCallError(
            'certificate',
            503,
            'worker_ingress_unavailable',
            'the database is away',
          );
        return calls.renewCertificate(body, options);
      },
    }));
    const before = fingerprintOf(config.tlsCertPath);
    await keeper.prepare(new AbortController().signal);
    await client.close();
    expect(sent).toHaveLength(3);
    expect(new Set(sent).size).toBe(1); // one key for every try: a lost answer is a replay, not a fork
    // Before a session, an outage is register's: one warning, then one recovery line (ADR 0040).
    const said = lines.map((l) => (JSON.parse(l) as { msg: string }).msg);
    expect(said.filter((m) => m === 'register failed')).toHaveLength(1);
    expect(said.filter((m) => m === 'register recovered')).toHaveLength(1);
    expect(fingerprintOf(config.tlsCertPath)).not.toBe(before);
    expect(keeper.fingerprint).toBe(fingerprintOf(config.tlsCertPath));
  });

  it('while running, a renewal that gets no answer until the certificate expires loses the identity (exit 6)', async () => {
    await enrolled('keep-expire');
    let offsetMs = 0;
    let tries = 0;
    const { keeper, client } = keeperFor(
      'keep-expire',
      '',
      (calls) => ({
        ...calls,
        renewCertificate: async (body, options) => {
          if (++tries === 1) return calls.renewCertificate(body, options); // the start's renewal
          throw new IngressCallError('certificate', 0, 'transport_error', 'the control plane is away');
        },
      }),
      undefined,
      () => Date.now() + offsetMs,
    );
    await keeper.prepare(new AbortController().signal);
    offsetMs = 365 * 24 * 3_600_000; // the machine's clock says the certificate's life is over
    keeper.startRenewing();
    const lost = await keeper.whenLost();
    await client.close();
    expect({ loss: lost.loss, tries }).toEqual({ loss: 'certificate_expired', tries: 2 });
    expect(lost.message).toMatch(/enroll again with a new token/);
  });
});
