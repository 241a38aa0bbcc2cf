// The unit spec of `enroll.ts` and `certificate.ts` and the answer they share (issued-certificate.ts).
import 'reflect-metadata';
import { KeyObject, createPrivateKey, webcrypto } from 'node:crypto';
import * as x509 from '@peculiar/x509';
import {
  CERTIFICATE,
  buildCertificateRequest,
  parseCertificateAnswer,
  parseCertificateRequest,
} from './certificate';
import { ENROLL, buildEnrollRequest, parseEnrollAnswer, parseEnrollRequest } from './enroll';
import { fieldsAfter } from './call';
import { refusalOf } from './golden';

const EC = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;
x509.cryptoProvider.set(webcrypto);

/** A key and a self-signed certificate over it, as the worker would hold after an enrollment. */
async function issued(workerId: string): Promise<{ pem: string; key: KeyObject }> {
  const keys = (await webcrypto.subtle.generateKey(EC, true, ['sign', 'verify'])) as webcrypto.CryptoKeyPair;
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: '0a1b2c',
    name: `CN=${workerId}`,
    notBefore: new Date('2026-12-07T00:00:00Z'),
    notAfter: new Date('2026-12-08T00:00:00Z'),
    keys,
    signingAlgorithm: EC,
  });
  const pkcs8 = await webcrypto.subtle.exportKey('pkcs8', keys.privateKey);
  return {
    pem: cert.toString('pem'),
    key: createPrivateKey({ key: Buffer.from(pkcs8), format: 'der', type: 'pkcs8' }),
  };
}

describe('enroll and certificate (ingress/enroll.ts, ingress/certificate.ts)', () => {
  let mine: { pem: string; key: KeyObject };
  let other: { pem: string; key: KeyObject };
  const answer = (patch: Record<string, unknown> = {}) =>
    JSON.stringify({
      workerId: 'router-shanghai',
      certificatePem: mine.pem,
      chainPem: '',
      fingerprint: 'ab'.repeat(32),
      serial: '0a1b2c',
      notAfter: '2026-12-08T00:00:00.000Z',
      ...patch,
    });

  beforeAll(async () => {
    mine = await issued('router-shanghai');
    other = await issued('router-shanghai');
  });

  it('builds the golden bodies and the control plane reads their shape', () => {
    const csr = '-----BEGIN CERTIFICATE REQUEST-----\nMIIB\n-----END CERTIFICATE REQUEST-----\n';
    const enroll = buildEnrollRequest({ csr, token: 'qlet_' + 'x'.repeat(43), workerId: 'router-shanghai' });
    expect(JSON.stringify(enroll)).toBe(
      `{"workerId":"router-shanghai","token":"qlet_${'x'.repeat(43)}","csr":${JSON.stringify(csr)}}`,
    );
    expect(parseEnrollRequest(enroll)).toEqual(enroll);
    expect(JSON.stringify(buildCertificateRequest({ csr }))).toBe(`{"csr":${JSON.stringify(csr)}}`);
    expect(parseCertificateRequest({ csr })).toEqual({ csr });
    expect(refusalOf(() => parseEnrollRequest({ ...enroll, 备注: 'x' }))).toBe('备注: unknown_field');
    expect(refusalOf(() => parseEnrollRequest({ ...enroll, workerId: '上海路由器' }))).toBe(
      'workerId: invalid_format',
    );
    expect(refusalOf(() => parseCertificateRequest({ csr: 'x'.repeat(15 * 1024 + 1) }))).toBe(
      'csr: too_long',
    );
  });

  it('reads the answer: this worker, a certificate over the key it sent', () => {
    expect(parseEnrollAnswer(answer(), 'router-shanghai', mine.key)).toEqual(JSON.parse(answer()));
    expect(parseCertificateAnswer(Buffer.from(answer()), 'router-shanghai', mine.key).serial).toBe('0a1b2c');
  });

  it('refuses another worker, another key, no certificate, unknown fields and bad values', () => {
    const read = (body: string, key = mine.key) =>
      refusalOf(() => parseEnrollAnswer(body, 'router-shanghai', key));
    expect(read(answer({ workerId: 'router-beijing' }))).toBe('workerId:other_worker');
    expect(read(answer(), other.key)).toBe('certificatePem:other_key');
    expect(read(answer({ certificatePem: '不是证书' }))).toBe('certificatePem:not_a_certificate');
    expect(read(answer({ privateKeyPem: 'x' }))).toBe('privateKeyPem:unknown_field');
    expect(read(answer({ fingerprint: 'AB'.repeat(32) }))).toBe('fingerprint:invalid_format');
    expect(read(answer({ notAfter: '明天' }))).toBe('notAfter:invalid_format');
    expect(read(' '.repeat(ENROLL.answerLimit + 1))).toBe('too_large');
  });

  it('enroll is v1 but for the refusal of a pattern token that may not replace; certificate is v1', () => {
    expect(fieldsAfter(ENROLL, 1, 'request')).toEqual([]);
    expect(fieldsAfter(ENROLL, 1, 'answer')).toEqual([]);
    expect(ENROLL.refusals.filter((r) => r.since === 2)).toEqual([
      { status: 409, code: 'enrollment_token_may_not_replace', since: 2 },
    ]);
    expect(fieldsAfter(CERTIFICATE, 1, 'request')).toEqual([]);
    expect(fieldsAfter(CERTIFICATE, 1, 'answer')).toEqual([]);
    expect(CERTIFICATE.refusals.every((r) => r.since === 1)).toBe(true);
  });
});
