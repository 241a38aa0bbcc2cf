// tsyringe (a dependency of @peculiar/x509) throws at load time without a Reflect metadata polyfill.
import 'reflect-metadata';
import type * as PeculiarX509 from '@peculiar/x509';
import { X509Certificate } from 'node:crypto';
import { isWorkerId } from '@ql/domain';

/** Who is calling the worker ingress, derived only from the verified client certificate (R-ID-2). */
export interface WorkerPrincipal {
  readonly workerId: string;
  readonly fingerprint256: string;
  readonly serialNumber: string;
  readonly notAfter: string;
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
  };
}

/**
 * basicConstraints CA:TRUE, read from the extension itself: `X509Certificate.ca` follows OpenSSL's
 * purpose check, which calls CA:TRUE without keyCertSign "not a CA". Fails closed if unreadable.
 */
function declaresCa(cert: X509Certificate): boolean {
  try {
    const { BasicConstraintsExtension, X509Certificate: ParsedCertificate } = peculiarX509();
    return new ParsedCertificate(cert.raw).getExtensions(BasicConstraintsExtension).some((e) => e.ca);
  } catch {
    return true;
  }
}

/** Loaded with the first client certificate, not at start: an idle control plane does without it (ADR 0020). */
// eslint-disable-next-line @typescript-eslint/no-require-imports
const peculiarX509 = () => require('@peculiar/x509') as typeof PeculiarX509;

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
