import { promises as fs } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { ConfigError } from '../config/config';
import { DevPkiPaths, createCa, createWorkerCert, ensureDevPki } from '../pki';
import { WorkerIssuer, WorkerIssuerSettings } from './worker-issuer';

describe('WorkerIssuer (ADR 0045 §5)', () => {
  let tmp: string;
  let pki: DevPkiPaths;
  let settings: WorkerIssuerSettings;

  beforeAll(async () => {
    tmp = await fs.mkdtemp(path.join(os.tmpdir(), 'ql-issuer-'));
    pki = await ensureDevPki(tmp, { trustDomain: 'ql.test', workers: [] });
    settings = {
      workerIssuerCertPath: pki.workerIssuerCertPath,
      workerIssuerKeyPath: pki.workerIssuerKeyPath,
      workerIssuerKeyPem: '',
      workerCertTtlMs: 300_000,
      trustDomain: 'ql.test',
    };
  });
  afterAll(() => fs.rm(tmp, { recursive: true, force: true }));

  const write = async (name: string, text: string) => {
    const file = path.join(tmp, name);
    await fs.writeFile(file, text);
    return file;
  };

  it('is absent without a certificate: enrollment is off', () => {
    expect(
      WorkerIssuer.load({ ...settings, workerIssuerCertPath: '', workerIssuerKeyPath: '' }),
    ).toBeUndefined();
  });

  it("loads the dev PKI's intermediate from files, or its key from the environment", async () => {
    const fromFiles = WorkerIssuer.load(settings)!;
    expect(fromFiles.certificate.subject).toContain('Worker Issuer');
    expect(fromFiles.ttlMs).toBe(300_000);
    const keyPem = await fs.readFile(pki.workerIssuerKeyPath, 'utf8');
    const fromEnv = WorkerIssuer.load({ ...settings, workerIssuerKeyPath: '', workerIssuerKeyPem: keyPem })!;
    expect(fromEnv.certificate.fingerprint256).toBe(fromFiles.certificate.fingerprint256);
  });

  it('sends the certificates after the issuer in its file as its chain', async () => {
    const bundle = await write(
      'bundle.crt',
      (await fs.readFile(pki.workerIssuerCertPath, 'utf8')) + (await fs.readFile(pki.caCertPath, 'utf8')),
    );
    const issuer = WorkerIssuer.load({ ...settings, workerIssuerCertPath: bundle })!;
    expect(issuer.chainPem.match(/BEGIN CERTIFICATE/g)).toHaveLength(2);
  });

  it('refuses, at start and as a configuration error, an issuer that cannot sign', async () => {
    const stranger = await createCa({ commonName: 'other' });
    const leaf = await createWorkerCert(stranger, { workerId: 'w1', trustDomain: 'ql.test' });
    const cases: [Partial<WorkerIssuerSettings>, RegExp][] = [
      [{ workerIssuerCertPath: path.join(tmp, 'missing.crt') }, /QL_WORKER_ISSUER_CERT .*ENOENT/],
      [{ workerIssuerCertPath: await write('junk.crt', 'junk') }, /holds no PEM certificate/],
      [
        { workerIssuerKeyPath: await write('junk.key', 'junk') },
        /QL_WORKER_ISSUER_KEY is not a PEM private key/,
      ],
      [
        { workerIssuerKeyPath: '', workerIssuerKeyPem: stranger.keyPem },
        /QL_WORKER_ISSUER_KEY_PEM does not belong/,
      ],
      [
        {
          workerIssuerCertPath: await write('leaf.crt', leaf.certPem),
          workerIssuerKeyPem: leaf.keyPem,
          workerIssuerKeyPath: '',
        },
        /not a CA certificate/,
      ],
    ];
    for (const [change, message] of cases) {
      const load = () => WorkerIssuer.load({ ...settings, ...change });
      expect(load).toThrow(ConfigError);
      expect(load).toThrow(message);
    }
    expect(() => WorkerIssuer.load(settings, new Date(Date.now() + 3651 * 86_400_000))).toThrow(/expired/);
  });
});
