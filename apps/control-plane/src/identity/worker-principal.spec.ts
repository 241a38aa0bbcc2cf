import { X509Certificate } from 'node:crypto';
import { PemPair, WorkerCertOptions, createCa, createWorkerCert } from '../pki';
import { BasicConstraintsExtension, X509Certificate as ParsedCertificate } from '@peculiar/x509';
import { basicConstraintsCa, principalFromCertificate, validityRefusal } from './worker-principal';

const TRUST_DOMAIN = 'ql.test';

// R-ID-2 on the certificate alone; the e2e tests show which of these TLS already stops.
describe('principalFromCertificate', () => {
  let ca: PemPair;
  const cert = async (options: Partial<WorkerCertOptions> = {}) =>
    new X509Certificate(
      (await createWorkerCert(ca, { workerId: 'worker-1', trustDomain: TRUST_DOMAIN, ...options })).certPem,
    );

  beforeAll(async () => {
    ca = await createCa();
  });

  it('reads the worker id, fingerprint, serial and notAfter of a clientAuth leaf', async () => {
    const leaf = await cert();
    expect(principalFromCertificate(leaf, TRUST_DOMAIN)).toEqual({
      workerId: 'worker-1',
      fingerprint256: leaf.fingerprint256.replace(/:/g, '').toLowerCase(),
      serialNumber: leaf.serialNumber.toLowerCase(),
      notAfter: new Date(leaf.validTo).toISOString(),
      validFromMs: Date.parse(leaf.validFrom),
      validToMs: Date.parse(leaf.validTo),
    });
  });

  it('is inside its validity from notBefore to notAfter inclusive, refused a millisecond outside (checked per request)', async () => {
    const notBefore = new Date('2026-01-01T00:00:00Z');
    const notAfter = new Date('2026-01-02T00:00:00Z');
    const principal = principalFromCertificate(await cert({ notBefore, notAfter }), TRUST_DOMAIN)!;
    expect(validityRefusal(principal, notBefore.getTime() - 1)).toBe('not_yet_valid');
    expect(validityRefusal(principal, notBefore.getTime())).toBeNull();
    expect(validityRefusal(principal, notAfter.getTime())).toBeNull();
    expect(validityRefusal(principal, notAfter.getTime() + 1)).toBe('expired');
  });

  it.each<[string, Partial<WorkerCertOptions>]>([
    ['basicConstraints CA:TRUE with keyCertSign', { isCa: true }],
    ['basicConstraints CA:TRUE without keyCertSign', { isCa: true, keyCertSign: false }],
    ['no Extended Key Usage', { clientAuth: 'none' }],
    ['an Extended Key Usage without clientAuth', { clientAuth: false }],
  ])('refuses a certificate with %s', async (_name, options) => {
    expect(principalFromCertificate(await cert(options), TRUST_DOMAIN)).toBeNull();
  });

  it('reads basicConstraints cA from the DER as @peculiar/x509 does, and throws on a truncated one', async () => {
    const certs = [
      new X509Certificate(ca.certPem),
      await cert(),
      await cert({ isCa: true }),
      await cert({ isCa: true, keyCertSign: false }),
    ];
    const peculiar = (c: X509Certificate) =>
      new ParsedCertificate(c.raw).getExtensions(BasicConstraintsExtension).some((e) => e.ca);
    expect(certs.map((c) => basicConstraintsCa(c.raw))).toEqual([true, false, true, true]);
    expect(certs.map((c) => basicConstraintsCa(c.raw))).toEqual(certs.map(peculiar));
    const raw = (await cert()).raw;
    expect(() => basicConstraintsCa(raw.subarray(0, raw.length - 40))).toThrow(/DER/);
  });
});
