import { KeyObject, X509Certificate, createPrivateKey } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { ConfigError, type ControlPlaneConfig } from '../config/config';

/** The issuer's settings; the same names the README table lists (ADR 0045 §5). */
export type WorkerIssuerSettings = Pick<
  ControlPlaneConfig,
  'workerIssuerCertPath' | 'workerIssuerKeyPath' | 'workerIssuerKeyPem' | 'workerCertTtlMs' | 'trustDomain'
>;

/** A configuration error: the control plane exits 2 with the message. */
export class WorkerIssuerError extends ConfigError {}

const PEM_CERTIFICATE = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g;
const STRONG_KEYS: Record<string, (key: KeyObject) => boolean> = {
  ec: (key) => ['prime256v1', 'secp384r1'].includes(key.asymmetricKeyDetails?.namedCurve ?? ''),
  ed25519: () => true,
  rsa: (key) => (key.asymmetricKeyDetails?.modulusLength ?? 0) >= 2048,
};

/** EC P-256/P-384, Ed25519 or RSA ≥ 2048: the keys an issuer signs with and a CSR may hold (ADR 0045 §2). */
export function strongKey(key: KeyObject): boolean {
  return STRONG_KEYS[key.asymmetricKeyType ?? '']?.(key) ?? false;
}

/**
 * The CA that signs the certificates of enrolled workers (ADR 0045 §5): its certificate (a CA, not
 * expired), the certificates after it in the same file (its chain, sent with every certificate it
 * signs) and its private key, which must belong to that certificate. Read once at start: a bad
 * issuer stops the control plane with a message naming the setting, never at the first enrollment.
 */
export class WorkerIssuer {
  private constructor(
    readonly certificate: X509Certificate,
    /** The issuer and the certificates after it in its file, PEM: the chain each answer carries. */
    readonly chainPem: string,
    readonly key: KeyObject,
    readonly ttlMs: number,
    readonly trustDomain: string,
  ) {}

  /** `undefined` when no issuer is configured: the enrollment routes then answer 503. */
  static load(settings: WorkerIssuerSettings, now = new Date()): WorkerIssuer | undefined {
    if (!settings.workerIssuerCertPath) return undefined;
    const certs = read(settings.workerIssuerCertPath, 'QL_WORKER_ISSUER_CERT').match(PEM_CERTIFICATE) ?? [];
    if (certs.length === 0)
      throw new WorkerIssuerError(
        `QL_WORKER_ISSUER_CERT (${settings.workerIssuerCertPath}) holds no PEM certificate`,
      );
    const certificate = new X509Certificate(certs[0]!);
    const keySource = settings.workerIssuerKeyPem
      ? { pem: settings.workerIssuerKeyPem, name: 'QL_WORKER_ISSUER_KEY_PEM' }
      : { pem: read(settings.workerIssuerKeyPath, 'QL_WORKER_ISSUER_KEY'), name: 'QL_WORKER_ISSUER_KEY' };
    let key: KeyObject;
    try {
      key = createPrivateKey(keySource.pem);
    } catch {
      throw new WorkerIssuerError(`${keySource.name} is not a PEM private key`);
    }
    if (!certificate.ca)
      throw new WorkerIssuerError('QL_WORKER_ISSUER_CERT is not a CA certificate (basicConstraints CA:TRUE)');
    if (!certificate.checkPrivateKey(key))
      throw new WorkerIssuerError(
        `${keySource.name} does not belong to the QL_WORKER_ISSUER_CERT certificate`,
      );
    if (!strongKey(key))
      throw new WorkerIssuerError(
        `${keySource.name}: the issuer's key must be EC P-256/P-384, Ed25519 or RSA ≥ 2048`,
      );
    if (new Date(certificate.validTo).getTime() <= now.getTime())
      throw new WorkerIssuerError(
        `QL_WORKER_ISSUER_CERT expired at ${new Date(certificate.validTo).toISOString()}`,
      );
    const chainPem = certs.map((pem) => `${pem}\n`).join('');
    return new WorkerIssuer(certificate, chainPem, key, settings.workerCertTtlMs, settings.trustDomain);
  }
}

function read(path: string, setting: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (error) {
    throw new WorkerIssuerError(
      `${setting} (${path}): ${(error as NodeJS.ErrnoException).code ?? String(error)}`,
    );
  }
}
