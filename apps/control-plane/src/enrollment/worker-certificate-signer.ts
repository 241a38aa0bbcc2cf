import { KeyObject, X509Certificate, createHash, createPublicKey, randomBytes, webcrypto } from 'node:crypto';
import type * as X509 from '@peculiar/x509';
import { IssuedWorkerCertificate } from '@ql/domain';
import { loadX509 } from '../pki/dev-pki';
import { WorkerIssuer, strongKey } from './worker-issuer';

/** Why a CSR is refused (`csr_refused`, the reason in the answer; ADR 0045 §2). */
export class CsrRefusedError extends Error {
  constructor(
    readonly reason:
      | 'not_a_csr'
      | 'bad_signature'
      | 'weak_key'
      | 'subject_alt_name'
      | 'ca'
      | 'key_usage'
      | 'extended_key_usage',
    message: string,
  ) {
    super(message);
  }
}

/** A CSR that passed every rule: its public key, to be signed into a certificate for `workerId`. */
export interface AcceptedCsr {
  readonly workerId: string;
  readonly publicKey: X509.PublicKey;
  /** SHA-256 of the SubjectPublicKeyInfo, hex: a renewal sent again is known by it (§4). */
  readonly publicKeyDigest: string;
}

const CLIENT_AUTH = '1.3.6.1.5.5.7.3.2';
const CLOCK_SKEW_MS = 5 * 60 * 1000;
const PEM_CSR =
  /^\s*-----BEGIN CERTIFICATE REQUEST-----[A-Za-z0-9+/=\s]+-----END CERTIFICATE REQUEST-----\s*$/;

/**
 * Reads a PEM PKCS#10 CSR for `workerId` (ADR 0045 §2). The control plane decides the certificate,
 * not the CSR: what the CSR may do is hold a strong key, prove it (self-signature) and ask for nothing
 * beyond what the worker gets anyway. A SAN other than exactly the worker's SPIFFE URI, `CA:TRUE`,
 * `keyCertSign`/`cRLSign`, or an EKU without `clientAuth` is refused; so are a broken signature, a key
 * that is not EC P-256/P-384, Ed25519 or RSA ≥ 2048, and bytes that are not a CSR. Its subject is ignored.
 */
export async function acceptCsr(pem: string, workerId: string, trustDomain: string): Promise<AcceptedCsr> {
  const x509 = loadX509();
  let csr: X509.Pkcs10CertificateRequest;
  try {
    if (!PEM_CSR.test(pem)) throw new Error('not PEM');
    csr = new x509.Pkcs10CertificateRequest(pem);
  } catch {
    throw new CsrRefusedError('not_a_csr', 'csr is not a PEM PKCS#10 certificate request');
  }
  const spki = Buffer.from(csr.publicKey.rawData);
  let key: KeyObject;
  try {
    key = createPublicKey({ key: spki, format: 'der', type: 'spki' });
  } catch {
    throw new CsrRefusedError('weak_key', 'the CSR key is not one Node can read');
  }
  if (!strongKey(key))
    throw new CsrRefusedError(
      'weak_key',
      'the CSR key must be EC P-256/P-384, Ed25519 or RSA of at least 2048 bits',
    );
  if (!(await csr.verify().catch(() => false)))
    throw new CsrRefusedError('bad_signature', 'the CSR signature does not verify with its own key');
  const uri = `spiffe://${trustDomain}/worker/${workerId}`;
  for (const extension of csr.extensions) {
    if (extension instanceof x509.SubjectAlternativeNameExtension) {
      const names = extension.names.toJSON();
      if (names.length !== 1 || names[0]!.type !== 'url' || names[0]!.value !== uri)
        throw new CsrRefusedError(
          'subject_alt_name',
          `the CSR may ask for no subject alternative name but ${uri}`,
        );
    } else if (extension instanceof x509.BasicConstraintsExtension) {
      if (extension.ca) throw new CsrRefusedError('ca', 'the CSR asks for CA:TRUE');
    } else if (extension instanceof x509.KeyUsagesExtension) {
      const forbidden = x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign;
      if (extension.usages & forbidden)
        throw new CsrRefusedError('key_usage', 'the CSR asks for keyCertSign or cRLSign');
    } else if (extension instanceof x509.ExtendedKeyUsageExtension) {
      if (!extension.usages.map(String).includes(CLIENT_AUTH))
        throw new CsrRefusedError(
          'extended_key_usage',
          'the CSR asks for an extended key usage without clientAuth',
        );
    }
  }
  return {
    workerId,
    publicKey: csr.publicKey,
    publicKeyDigest: createHash('sha256').update(spki).digest('hex'),
  };
}

/**
 * Signs the certificate the issuer gives an accepted CSR: subject `CN=<worker id>`, exactly the
 * SPIFFE URI SAN, EKU clientAuth, KU digitalSignature, CA:FALSE, 128 random serial bits, valid from
 * now − 5 min for the issuer's lifetime (`QL_WORKER_CERT_TTL_MS`).
 */
export async function signWorkerCertificate(
  issuer: WorkerIssuer,
  csr: AcceptedCsr,
  now: number,
): Promise<IssuedWorkerCertificate> {
  const x509 = loadX509();
  const issuerCert = new x509.X509Certificate(issuer.certificate.raw);
  const { importParams, signingAlgorithm } = signingOf(issuer.key);
  const signingKey = await webcrypto.subtle.importKey(
    'pkcs8',
    issuer.key.export({ format: 'der', type: 'pkcs8' }),
    importParams,
    false,
    ['sign'],
  );
  const issuerSki = issuerCert.getExtension(x509.SubjectKeyIdentifierExtension);
  const serial = randomBytes(16);
  serial[0] = (serial[0]! & 0x7f) | 0x40; // positive, and no leading zero byte to strip
  const certificate = await x509.X509CertificateGenerator.create({
    serialNumber: serial.toString('hex'),
    subject: [{ CN: [csr.workerId] }],
    issuer: issuerCert.subjectName,
    notBefore: new Date(now - CLOCK_SKEW_MS),
    notAfter: new Date(now + issuer.ttlMs),
    publicKey: csr.publicKey,
    signingKey,
    signingAlgorithm,
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
      new x509.ExtendedKeyUsageExtension([CLIENT_AUTH], false),
      new x509.SubjectAlternativeNameExtension(
        [{ type: 'url', value: `spiffe://${issuer.trustDomain}/worker/${csr.workerId}` }],
        false,
      ),
      await x509.SubjectKeyIdentifierExtension.create(csr.publicKey),
      issuerSki
        ? new x509.AuthorityKeyIdentifierExtension(issuerSki.keyId)
        : await x509.AuthorityKeyIdentifierExtension.create(issuerCert.publicKey),
    ],
  });
  const pem = `${certificate.toString('pem')}\n`;
  const node = new X509Certificate(pem);
  return {
    fingerprint: node.fingerprint256.replace(/:/g, '').toLowerCase(),
    workerId: csr.workerId,
    serial: node.serialNumber.toLowerCase(),
    publicKeyDigest: csr.publicKeyDigest,
    certificatePem: pem,
    issuedAt: now,
    notAfter: Date.parse(node.validTo),
  };
}

function signingOf(key: KeyObject): {
  importParams: webcrypto.AlgorithmIdentifier | webcrypto.EcKeyImportParams | webcrypto.RsaHashedImportParams;
  signingAlgorithm: webcrypto.AlgorithmIdentifier | webcrypto.EcdsaParams | webcrypto.RsaHashedImportParams;
} {
  if (key.asymmetricKeyType === 'ec') {
    const p384 = key.asymmetricKeyDetails?.namedCurve === 'secp384r1';
    return {
      importParams: { name: 'ECDSA', namedCurve: p384 ? 'P-384' : 'P-256' },
      signingAlgorithm: { name: 'ECDSA', hash: p384 ? 'SHA-384' : 'SHA-256' },
    };
  }
  if (key.asymmetricKeyType === 'ed25519')
    return { importParams: { name: 'Ed25519' }, signingAlgorithm: { name: 'Ed25519' } };
  return {
    importParams: { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256' },
    signingAlgorithm: { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256' },
  };
}
