import { X509Certificate } from 'node:crypto';
import { isWorkerId } from '@ql/domain';

/** Who is calling the worker ingress, derived only from the verified client certificate (R-ID-2). */
export interface WorkerPrincipal {
  readonly workerId: string;
  readonly fingerprint256: string;
  readonly serialNumber: string;
  readonly notAfter: string;
  /** The validity window in epoch ms, checked on every request (a TLS connection outlives its handshake). */
  readonly validFromMs: number;
  readonly validToMs: number;
}

/**
 * Why the certificate may not speak at `now` although TLS accepted it: the handshake checked its
 * validity once, and a kept-alive connection (or a held pull) goes on past `notAfter` (issue 15 item
 * 11, ADR 0033). Both bounds are inclusive, as in X.509.
 */
export function validityRefusal(principal: WorkerPrincipal, now: number): 'not_yet_valid' | 'expired' | null {
  if (now < principal.validFromMs) return 'not_yet_valid';
  if (now > principal.validToMs) return 'expired';
  return null;
}

const CLIENT_AUTH_OID = '1.3.6.1.5.5.7.3.2';

/**
 * Returns the principal, or null when the certificate may not speak for a worker: it must not be a
 * CA, must allow clientAuth, and must carry exactly one URI SAN `spiffe://<trustDomain>/worker/<id>`.
 */
export function principalFromCertificate(cert: X509Certificate, trustDomain: string): WorkerPrincipal | null {
  if (cert.ca || declaresCa(cert)) return null;
  const usages = cert.keyUsage;
  if (!usages || !usages.includes(CLIENT_AUTH_OID)) return null;
  const uris = uriSans(cert.subjectAltName);
  if (uris.length !== 1) return null;
  const prefix = `spiffe://${trustDomain}/worker/`;
  const uri = uris[0]!;
  if (!uri.startsWith(prefix)) return null;
  const workerId = uri.slice(prefix.length);
  if (!isWorkerId(workerId)) return null;
  return {
    workerId,
    fingerprint256: cert.fingerprint256.replace(/:/g, '').toLowerCase(),
    serialNumber: cert.serialNumber.toLowerCase(),
    notAfter: new Date(cert.validTo).toISOString(),
    validFromMs: Date.parse(cert.validFrom),
    validToMs: Date.parse(cert.validTo),
  };
}

/**
 * basicConstraints CA:TRUE, read from the extension itself: `X509Certificate.ca` follows OpenSSL's
 * purpose check, which calls CA:TRUE without keyCertSign "not a CA". Fails closed if unreadable.
 */
function declaresCa(cert: X509Certificate): boolean {
  try {
    return basicConstraintsCa(cert.raw);
  } catch {
    return true;
  }
}

/** One DER element: its tag, and where its content starts and ends in the buffer. */
interface Der {
  readonly tag: number;
  readonly start: number;
  readonly end: number;
}

function derAt(der: Buffer, at: number, limit: number): Der {
  const tag = der[at];
  let length = der[at + 1];
  let start = at + 2;
  if (tag === undefined || length === undefined) throw new Error('DER: truncated');
  if (length & 0x80) {
    const bytes = length & 0x7f;
    if (bytes < 1 || bytes > 4) throw new Error('DER: bad length');
    length = 0;
    for (let i = 0; i < bytes; i++) length = length * 256 + (der[start + i] ?? Number.NaN);
    start += bytes;
  }
  const end = start + length;
  if (!(end <= limit)) throw new Error('DER: element past its parent');
  return { tag, start, end };
}

function derChildren(der: Buffer, parent: Der): Der[] {
  const children: Der[] = [];
  for (let at = parent.start; at < parent.end; at = children[children.length - 1]!.end)
    children.push(derAt(der, at, parent.end));
  return children;
}

const BASIC_CONSTRAINTS_OID = Buffer.from([0x55, 0x1d, 0x13]); // 2.5.29.19

/**
 * Whether a certificate's DER has a basicConstraints extension with cA TRUE: Certificate →
 * tbsCertificate → [3] extensions → each Extension {extnID, critical?, extnValue OCTET STRING
 * {BasicConstraints SEQUENCE {cA BOOLEAN DEFAULT FALSE, pathLen?}}}. Throws on malformed DER. Read
 * here rather than with @peculiar/x509, which the first worker call would otherwise load (ADR 0020).
 */
export function basicConstraintsCa(der: Buffer): boolean {
  const certificate = derAt(der, 0, der.length);
  const tbs = derChildren(der, certificate)[0];
  if (certificate.tag !== 0x30 || tbs?.tag !== 0x30) throw new Error('DER: not a certificate');
  const extensions = derChildren(der, tbs).find((field) => field.tag === 0xa3);
  if (!extensions) return false;
  const list = derChildren(der, extensions)[0];
  if (list?.tag !== 0x30) throw new Error('DER: bad extensions');
  return derChildren(der, list).some((extension) => {
    const parts = derChildren(der, extension);
    const id = parts[0];
    const value = parts[parts.length - 1];
    if (id?.tag !== 0x06 || !der.subarray(id.start, id.end).equals(BASIC_CONSTRAINTS_OID)) return false;
    if (value?.tag !== 0x04) throw new Error('DER: bad basicConstraints');
    const constraints = derAt(der, value.start, value.end);
    if (constraints.tag !== 0x30) throw new Error('DER: bad basicConstraints');
    const first = derChildren(der, constraints)[0];
    return first?.tag === 0x01 && der[first.start] !== 0x00;
  });
}

/** Node renders SANs as `DNS:a, URI:b`; values with special characters are JSON-quoted. */
function uriSans(subjectAltName: string | undefined): string[] {
  if (!subjectAltName) return [];
  const result: string[] = [];
  const pattern = /(?:^|, )URI:("(?:[^"\\]|\\.)*"|[^,]*)/g;
  for (const match of subjectAltName.matchAll(pattern)) {
    const raw = match[1]!;
    result.push(raw.startsWith('"') ? (JSON.parse(raw) as string) : raw);
  }
  return result;
}
