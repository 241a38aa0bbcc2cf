import { X509Certificate, createPrivateKey } from 'node:crypto';
import { promises as fs } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { PemPair, createCa, createServerCert, createWorkerCert, ensureDevPki } from './index';
// After ./index, which loads the Reflect polyfill @peculiar/x509 needs.
import * as x509 from '@peculiar/x509';

const CLIENT_AUTH = '1.3.6.1.5.5.7.3.2';
const SERVER_AUTH = '1.3.6.1.5.5.7.3.1';
const TRUST_DOMAIN = 'ql.test';

describe('dev PKI', () => {
  let ca: PemPair;
  let caCert: X509Certificate;

  beforeAll(async () => {
    ca = await createCa({ commonName: 'Unit Test CA' });
    caCert = new X509Certificate(ca.certPem);
  });

  describe('createCa', () => {
    it('makes a self-signed P-256 CA valid for about 10 years', () => {
      expect(caCert.ca).toBe(true);
      expect(caCert.subject).toBe('CN=Unit Test CA');
      expect(caCert.checkIssued(caCert)).toBe(true);
      expect(caCert.verify(caCert.publicKey)).toBe(true);
      expect(caCert.publicKey.asymmetricKeyDetails).toEqual({ namedCurve: 'prime256v1' });
      const years = (Date.parse(caCert.validTo) - Date.parse(caCert.validFrom)) / (365 * 24 * 3600 * 1000);
      expect(years).toBeGreaterThan(9.9);
      expect(years).toBeLessThan(10.1);
    });

    it('exports the key as PKCS#8 matching the certificate', () => {
      expect(ca.keyPem).toMatch(/^-----BEGIN PRIVATE KEY-----\n[\s\S]+\n-----END PRIVATE KEY-----\n$/);
      const key = createPrivateKey(ca.keyPem);
      expect(key.asymmetricKeyType).toBe('ec');
      expect(caCert.checkPrivateKey(key)).toBe(true);
    });

    it('uses a fresh positive 16-byte serial number each time', async () => {
      const other = new X509Certificate((await createCa()).certPem);
      for (const cert of [caCert, other]) {
        expect(cert.serialNumber).toMatch(/^[0-7][0-9A-F]{31}$/);
      }
      expect(other.serialNumber).not.toBe(caCert.serialNumber);
    });
  });

  describe('createWorkerCert', () => {
    it('issues a clientAuth leaf with exactly the SPIFFE URI SAN', async () => {
      const pair = await createWorkerCert(ca, { workerId: 'worker-1', trustDomain: TRUST_DOMAIN });
      const leaf = new X509Certificate(pair.certPem);
      expect(leaf.verify(caCert.publicKey)).toBe(true);
      expect(leaf.checkIssued(caCert)).toBe(true);
      expect(leaf.ca).toBe(false);
      expect(leaf.keyUsage).toEqual([CLIENT_AUTH]);
      expect(leaf.subjectAltName).toBe('URI:spiffe://ql.test/worker/worker-1');
      expect(leaf.subject).toBe('CN=worker-1');
      expect(leaf.checkPrivateKey(createPrivateKey(pair.keyPem))).toBe(true);
    });

    it('backdates notBefore by about 5 minutes and is valid for about a year', async () => {
      const before = Date.now();
      const leaf = new X509Certificate(
        (await createWorkerCert(ca, { workerId: 'w', trustDomain: TRUST_DOMAIN })).certPem,
      );
      const skew = before - Date.parse(leaf.validFrom);
      expect(skew).toBeGreaterThanOrEqual(4 * 60 * 1000);
      expect(skew).toBeLessThanOrEqual(6 * 60 * 1000);
      const days = (Date.parse(leaf.validTo) - before) / (24 * 3600 * 1000);
      expect(days).toBeGreaterThan(364);
      expect(days).toBeLessThanOrEqual(365);
    });

    it('honours explicit notBefore/notAfter (e.g. an expired certificate)', async () => {
      const notBefore = new Date('2020-01-01T00:00:00Z');
      const notAfter = new Date('2020-01-02T00:00:00Z');
      const leaf = new X509Certificate(
        (await createWorkerCert(ca, { workerId: 'w', trustDomain: TRUST_DOMAIN, notBefore, notAfter }))
          .certPem,
      );
      expect(Date.parse(leaf.validFrom)).toBe(notBefore.getTime());
      expect(Date.parse(leaf.validTo)).toBe(notAfter.getTime());
    });

    it('isCa: true makes a CA certificate that is still signed by the CA', async () => {
      const leaf = new X509Certificate(
        (await createWorkerCert(ca, { workerId: 'w', trustDomain: TRUST_DOMAIN, isCa: true })).certPem,
      );
      expect(leaf.ca).toBe(true);
      expect(leaf.verify(caCert.publicKey)).toBe(true);
      expect(leaf.keyUsage).toEqual([CLIENT_AUTH]);
      expect(leaf.subjectAltName).toBe('URI:spiffe://ql.test/worker/w');
    });

    it('clientAuth: false carries serverAuth only', async () => {
      const leaf = new X509Certificate(
        (await createWorkerCert(ca, { workerId: 'w', trustDomain: TRUST_DOMAIN, clientAuth: false })).certPem,
      );
      expect(leaf.keyUsage).toEqual([SERVER_AUTH]);
      expect(leaf.ca).toBe(false);
    });

    it("clientAuth: 'none' leaves the EKU extension out", async () => {
      const leaf = new X509Certificate(
        (await createWorkerCert(ca, { workerId: 'w', trustDomain: TRUST_DOMAIN, clientAuth: 'none' }))
          .certPem,
      );
      expect(leaf.keyUsage).toBeUndefined();
    });

    it('isCa without keyCertSign is CA:TRUE that OpenSSL does not call a CA', async () => {
      const pem = (
        await createWorkerCert(ca, {
          workerId: 'w',
          trustDomain: TRUST_DOMAIN,
          isCa: true,
          keyCertSign: false,
        })
      ).certPem;
      const parsed = new x509.X509Certificate(pem);
      expect(parsed.getExtension(x509.BasicConstraintsExtension)?.ca).toBe(true);
      expect(parsed.getExtension(x509.KeyUsagesExtension)?.usages).toBe(x509.KeyUsageFlags.digitalSignature);
      expect(new X509Certificate(pem).ca).toBe(false);
    });

    it('uris replaces the URI SANs entirely', async () => {
      const two = new X509Certificate(
        (
          await createWorkerCert(ca, {
            workerId: 'w',
            trustDomain: TRUST_DOMAIN,
            uris: ['spiffe://ql.test/worker/a', 'spiffe://other.test/worker/b'],
          })
        ).certPem,
      );
      expect(two.subjectAltName).toBe('URI:spiffe://ql.test/worker/a, URI:spiffe://other.test/worker/b');

      const none = new X509Certificate(
        (await createWorkerCert(ca, { workerId: 'w', trustDomain: TRUST_DOMAIN, uris: [] })).certPem,
      );
      expect(none.subjectAltName).toBeUndefined();
      expect(none.verify(caCert.publicKey)).toBe(true);
    });

    it.each(['', 'Upper', '../escape', 'a/b', '-lead', 'x'.repeat(64)])(
      'rejects worker id %j',
      async (workerId) => {
        await expect(createWorkerCert(ca, { workerId, trustDomain: TRUST_DOMAIN })).rejects.toThrow(
          /invalid worker id/,
        );
      },
    );

    it('rejects a trust domain that would change the URI shape', async () => {
      await expect(createWorkerCert(ca, { workerId: 'w', trustDomain: 'evil/worker' })).rejects.toThrow(
        /invalid trust domain/,
      );
    });
  });

  describe('createServerCert', () => {
    it('issues a serverAuth leaf with DNS and IP SANs', async () => {
      const pair = await createServerCert(ca, { dnsNames: ['localhost'], ipAddresses: ['127.0.0.1', '::1'] });
      const leaf = new X509Certificate(pair.certPem);
      expect(leaf.verify(caCert.publicKey)).toBe(true);
      expect(leaf.ca).toBe(false);
      expect(leaf.keyUsage).toEqual([SERVER_AUTH]);
      expect(leaf.checkHost('localhost')).toBe('localhost');
      expect(leaf.checkIP('127.0.0.1')).toBe('127.0.0.1');
      expect(leaf.checkIP('::1')).toBe('::1');
      expect(leaf.checkHost('example.com')).toBeUndefined();
      expect(leaf.subject).toBe('CN=localhost');
    });
  });

  describe('ensureDevPki', () => {
    let tmp: string;

    beforeEach(async () => {
      tmp = await fs.mkdtemp(path.join(os.tmpdir(), 'ql-dev-pki-'));
    });

    afterEach(async () => {
      await fs.rm(tmp, { recursive: true, force: true });
    });

    const mode = async (p: string): Promise<number> => (await fs.stat(p)).mode & 0o777;
    const fingerprint = async (p: string): Promise<string> =>
      new X509Certificate(await fs.readFile(p)).fingerprint256;

    it('creates a private directory with a CA, a server pair and worker pairs', async () => {
      const dir = path.join(tmp, 'pki');
      const paths = await ensureDevPki(dir, { trustDomain: TRUST_DOMAIN, workers: ['w1', 'w2'] });

      expect(paths.created).toBe(true);
      expect(paths.dir).toBe(dir);
      expect(Object.keys(paths.workers)).toEqual(['w1', 'w2']);
      expect(await mode(dir)).toBe(0o700);
      expect(await mode(path.join(dir, 'workers'))).toBe(0o700);
      for (const key of [
        paths.caKeyPath,
        paths.serverKeyPath,
        paths.workerIssuerKeyPath,
        paths.workers.w1!.keyPath,
        paths.workers.w2!.keyPath,
      ]) {
        expect(await mode(key)).toBe(0o600);
      }
      expect((await fs.readdir(dir)).sort()).toEqual([
        'ca.crt',
        'ca.key',
        'server.crt',
        'server.key',
        'worker-issuer.crt',
        'worker-issuer.key',
        'workers',
      ]);
      expect((await fs.readdir(path.join(dir, 'workers'))).sort()).toEqual([
        'w1.crt',
        'w1.key',
        'w2.crt',
        'w2.key',
      ]);

      const caFile = new X509Certificate(await fs.readFile(paths.caCertPath));
      const server = new X509Certificate(await fs.readFile(paths.serverCertPath));
      expect(server.verify(caFile.publicKey)).toBe(true);
      expect(server.checkHost('localhost')).toBe('localhost');
      expect(server.checkIP('::1')).toBe('::1');
      const w2 = new X509Certificate(await fs.readFile(paths.workers.w2!.certPath));
      expect(w2.verify(caFile.publicKey)).toBe(true);
      expect(w2.subjectAltName).toBe('URI:spiffe://ql.test/worker/w2');
      // The worker issuer (ADR 0045 §5): a CA under the root that may sign leaves only.
      const issuer = new X509Certificate(await fs.readFile(paths.workerIssuerCertPath));
      expect(issuer.ca).toBe(true);
      expect(issuer.checkIssued(caFile) && issuer.verify(caFile.publicKey)).toBe(true);
      const constraints = new x509.X509Certificate(issuer.raw).getExtension(x509.BasicConstraintsExtension);
      expect(constraints).toMatchObject({ ca: true, pathLength: 0 });
      expect(issuer.checkPrivateKey(createPrivateKey(await fs.readFile(paths.workerIssuerKeyPath)))).toBe(
        true,
      );
    });

    it('keeps the worker issuer across starts and replaces one the CA did not sign', async () => {
      const first = await ensureDevPki(tmp, { trustDomain: TRUST_DOMAIN, workers: [] });
      const issuerFp = await fingerprint(first.workerIssuerCertPath);
      await ensureDevPki(tmp, { trustDomain: TRUST_DOMAIN, workers: [] });
      expect(await fingerprint(first.workerIssuerCertPath)).toBe(issuerFp);
      const stranger = await createCa({ commonName: 'not the dev CA' });
      await fs.writeFile(first.workerIssuerCertPath, stranger.certPem);
      await fs.writeFile(first.workerIssuerKeyPath, stranger.keyPem);
      await ensureDevPki(tmp, { trustDomain: TRUST_DOMAIN, workers: [] });
      const again = new X509Certificate(await fs.readFile(first.workerIssuerCertPath));
      expect(again.checkIssued(new X509Certificate(await fs.readFile(first.caCertPath)))).toBe(true);
    });

    it('is idempotent: keeps the CA and existing leaves, adds missing workers', async () => {
      const first = await ensureDevPki(tmp, { trustDomain: TRUST_DOMAIN, workers: ['w1'] });
      const caFp = await fingerprint(first.caCertPath);
      const serverFp = await fingerprint(first.serverCertPath);
      const w1Fp = await fingerprint(first.workers.w1!.certPath);

      const second = await ensureDevPki(tmp, { trustDomain: TRUST_DOMAIN, workers: ['w1', 'w3'] });
      expect(second.created).toBe(false);
      expect(await fingerprint(second.caCertPath)).toBe(caFp);
      expect(await fingerprint(second.serverCertPath)).toBe(serverFp);
      expect(await fingerprint(second.workers.w1!.certPath)).toBe(w1Fp);
      const w3 = new X509Certificate(await fs.readFile(second.workers.w3!.certPath));
      expect(w3.verify(new X509Certificate(await fs.readFile(second.caCertPath)).publicKey)).toBe(true);
      expect(await mode(second.workers.w3!.keyPath)).toBe(0o600);
      expect((await fs.readdir(path.join(tmp, 'workers'))).filter((f) => f.endsWith('.tmp'))).toEqual([]);
    });

    it('reissues a worker certificate whose SPIFFE id no longer matches the trust domain', async () => {
      const first = await ensureDevPki(tmp, { trustDomain: TRUST_DOMAIN, workers: ['w1'] });
      const second = await ensureDevPki(tmp, { trustDomain: 'other.test', workers: ['w1'] });
      expect(await fingerprint(second.caCertPath)).toBe(await fingerprint(first.caCertPath));
      const w1 = new X509Certificate(await fs.readFile(second.workers.w1!.certPath));
      expect(w1.subjectAltName).toBe('URI:spiffe://other.test/worker/w1');
    });

    it('refuses to replace a CA certificate whose key is missing', async () => {
      const first = await ensureDevPki(tmp, { trustDomain: TRUST_DOMAIN, workers: [] });
      await fs.rm(first.caKeyPath);
      await expect(ensureDevPki(tmp, { trustDomain: TRUST_DOMAIN, workers: [] })).rejects.toThrow(
        /ca\.key is missing/,
      );
    });

    it('puts the given server DNS names on the server certificate and rejects names that are not DNS names', async () => {
      const paths = await ensureDevPki(path.join(tmp, 'ok'), {
        trustDomain: TRUST_DOMAIN,
        workers: [],
        serverDnsNames: ['localhost', 'control-plane-1', 'ql-ingress.qinglong.svc'],
      });
      const server = new X509Certificate(await fs.readFile(paths.serverCertPath));
      for (const name of ['localhost', 'control-plane-1', 'ql-ingress.qinglong.svc']) {
        expect(server.checkHost(name, { wildcards: false })).toBe(name);
      }
      for (const bad of ['', 'Upper', 'a_b', '-lead', 'trail-', 'a..b', '*.wild', 'x'.repeat(64)]) {
        await expect(
          ensureDevPki(path.join(tmp, 'bad'), {
            trustDomain: TRUST_DOMAIN,
            workers: [],
            serverDnsNames: [bad],
          }),
        ).rejects.toThrow(/invalid server DNS name/);
      }
      expect(await fs.readdir(tmp)).toEqual(['ok']);
    });

    it('rejects worker ids that are not safe file names', async () => {
      await expect(ensureDevPki(tmp, { trustDomain: TRUST_DOMAIN, workers: ['../x'] })).rejects.toThrow(
        /invalid worker id/,
      );
      expect(await fs.readdir(tmp)).toEqual([]);
    });
  });
});
