import { KeyObject, X509Certificate, createPrivateKey } from 'node:crypto';
import { closeSync, existsSync, mkdirSync, readFileSync, renameSync } from 'node:fs';
import { basename, dirname } from 'node:path';
import { createTempFile, syncFolder, unlinkQuietly, writeFileAtomic } from '../journal/durable-files';

/** The worker's certificate as read from its files, with the key it was checked against. */
export interface CurrentCertificate {
  readonly certificate: X509Certificate;
  /** Lower-case hex SHA-256 of the DER, as the control plane names it. */
  readonly fingerprint: string;
  readonly notAfterMs: number;
}

/** Why the files hold no usable certificate: none, unreadable, or a key that is not the certificate's. */
export type CertificateProblem = 'missing' | 'unreadable' | 'key_mismatch';

/**
 * The certificate and key files of the worker (ADR 0045 §3): every write is a 0600 temp file,
 * fsynced, renamed into place, and the folder fsynced. A renewal's new key goes first to
 * `<key>.pending`; the certificate answered for it is renamed over `<cert>`, then the pending key
 * over `<key>`, in one synchronous step (no call of this process can read the files in between). A
 * crash leaves either the pending key beside the old pair (the renewal is sent again with the same
 * key: the control plane answers the same certificate) or the new certificate beside the pending
 * key (the last rename is done at the next start).
 */
export class CertificateFiles {
  readonly pendingKeyPath: string;
  /** Where a certificate the control plane revoked is put aside (ADR 0055): no longer a usable one. */
  readonly revokedPath: string;

  constructor(
    readonly certPath: string,
    readonly keyPath: string,
  ) {
    this.pendingKeyPath = `${keyPath}.pending`;
    this.revokedPath = `${certPath}.revoked`;
  }

  /** The revoked certificate moved aside (kept for an operator to look at), so the next start enrolls. */
  retire(): void {
    if (existsSync(this.certPath)) {
      renameSync(this.certPath, this.revokedPath);
      syncFolder(dirname(this.certPath));
    }
    unlinkQuietly(this.pendingKeyPath);
  }

  /** Whether a revoked certificate was put aside and nothing replaced it yet. */
  wasRevoked(): boolean {
    return existsSync(this.revokedPath) && !existsSync(this.certPath);
  }

  /** The current pair, or why there is none usable. The expiry is the caller's to judge. */
  read(): CurrentCertificate | CertificateProblem {
    if (!existsSync(this.certPath) || !existsSync(this.keyPath)) return 'missing';
    let certificate: X509Certificate;
    let key: KeyObject;
    try {
      certificate = new X509Certificate(readFileSync(this.certPath));
      key = createPrivateKey(readFileSync(this.keyPath));
    } catch {
      return 'unreadable';
    }
    if (!certificate.checkPrivateKey(key)) return 'key_mismatch';
    return describe(certificate);
  }

  /** The key a renewal was sent with and whose answer may not have landed; undefined when none. */
  readPendingKey(): KeyObject | undefined {
    if (!existsSync(this.pendingKeyPath)) return undefined;
    try {
      return createPrivateKey(readFileSync(this.pendingKeyPath));
    } catch {
      unlinkQuietly(this.pendingKeyPath); // a torn write cannot happen (temp + rename), but never trust it
      return undefined;
    }
  }

  /** Whether the certificate file already holds the one issued for the pending key. */
  certificateIsFor(key: KeyObject): boolean {
    try {
      return new X509Certificate(readFileSync(this.certPath)).checkPrivateKey(key);
    } catch {
      return false;
    }
  }

  /** Step 1: the new key, durable before its CSR leaves the machine. */
  writePendingKey(keyPem: string): void {
    ensureFolder(dirname(this.pendingKeyPath));
    writeFileAtomic(dirname(this.pendingKeyPath), basename(this.pendingKeyPath), keyPem);
  }

  /** Step 2: the answered certificate (and chain) over `<cert>`, then the pending key over `<key>`. */
  commit(certificatePem: string): void {
    const certFolder = dirname(this.certPath);
    ensureFolder(certFolder);
    const temp = createTempFile(certFolder, Buffer.from(certificatePem, 'utf8'));
    closeSync(temp.fd);
    try {
      renameSync(temp.path, this.certPath);
    } catch (error) {
      unlinkQuietly(temp.path);
      throw error;
    }
    renameSync(this.pendingKeyPath, this.keyPath);
    syncFolder(certFolder);
    if (dirname(this.keyPath) !== certFolder) syncFolder(dirname(this.keyPath));
  }

  /** A crash after the certificate's rename: the pending key is the certificate's, put it in place. */
  finishPending(): void {
    renameSync(this.pendingKeyPath, this.keyPath);
    syncFolder(dirname(this.keyPath));
  }
}

export function describe(certificate: X509Certificate): CurrentCertificate {
  return {
    certificate,
    fingerprint: certificate.fingerprint256.replaceAll(':', '').toLowerCase(),
    notAfterMs: Date.parse(certificate.validTo),
  };
}

/** The folders of a first enrollment may not exist yet: made 0700 (they hold a private key). */
function ensureFolder(folder: string): void {
  mkdirSync(folder, { recursive: true, mode: 0o700 });
}
