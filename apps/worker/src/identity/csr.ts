import { KeyObject, createPublicKey, generateKeyPairSync, sign } from 'node:crypto';

/**
 * The worker's PKCS#10 request (RFC 2986), written here in DER with node:crypto alone: an EC P-256
 * key, `CN=<worker id>`, no attributes or extensions (the control plane decides the certificate from
 * the token, never from the CSR: ADR 0045 §2), signed ECDSA with SHA-256. @peculiar/x509 builds the
 * same on Node 20's webcrypto, but loading it costs an idle worker about 13 MiB of RSS for good, and
 * the worker makes a CSR at every start (ADR 0045 §4): these 40 lines cost nothing.
 */

/** A new EC P-256 key pair: each enrollment and each renewal has its own (ADR 0045 §3). */
export function newWorkerKey(): { readonly privateKey: KeyObject; readonly keyPem: string } {
  const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  return { privateKey, keyPem: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString() };
}

/** The PEM CSR over `privateKey`'s public key, subject `CN=<workerId>`. */
export function buildCsr(workerId: string, privateKey: KeyObject): string {
  const publicSpki = createPublicKey(privateKey).export({ type: 'spki', format: 'der' });
  const subject = tlv(0x30, tlv(0x31, tlv(0x30, OID_COMMON_NAME, tlv(0x0c, Buffer.from(workerId, 'utf8')))));
  const info = tlv(0x30, tlv(0x02, Buffer.from([0])), subject, publicSpki, Buffer.from([0xa0, 0x00]));
  const signature = sign('sha256', info, { key: privateKey, dsaEncoding: 'der' });
  const request = tlv(
    0x30,
    info,
    tlv(0x30, OID_ECDSA_WITH_SHA256),
    tlv(0x03, Buffer.concat([Buffer.from([0]), signature])),
  );
  const base64 = request.toString('base64').replace(/.{64}/g, '$&\n');
  return `-----BEGIN CERTIFICATE REQUEST-----\n${base64.replace(/\n$/, '')}\n-----END CERTIFICATE REQUEST-----\n`;
}

/** 2.5.4.3 */
const OID_COMMON_NAME = Buffer.from([0x06, 0x03, 0x55, 0x04, 0x03]);
/** 1.2.840.10045.4.3.2 */
const OID_ECDSA_WITH_SHA256 = Buffer.from([0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x02]);

/** One DER tag-length-value. */
function tlv(tag: number, ...parts: Buffer[]): Buffer {
  const body = Buffer.concat(parts);
  let length: Buffer;
  if (body.length < 0x80) length = Buffer.from([body.length]);
  else {
    const bytes: number[] = [];
    for (let n = body.length; n > 0; n >>= 8) bytes.unshift(n & 0xff);
    length = Buffer.from([0x80 | bytes.length, ...bytes]);
  }
  return Buffer.concat([Buffer.from([tag]), length, body]);
}
