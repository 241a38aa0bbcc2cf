import { webcrypto } from 'node:crypto';
import { loadX509 } from '../../apps/control-plane/src/pki';

export type CsrKey = 'P-256' | 'P-384' | 'Ed25519' | 'RSA-2048' | 'RSA-1024';

const ALGORITHMS: Record<CsrKey, { gen: webcrypto.AlgorithmIdentifier | object; sign: object }> = {
  'P-256': { gen: { name: 'ECDSA', namedCurve: 'P-256' }, sign: { name: 'ECDSA', hash: 'SHA-256' } },
  'P-384': { gen: { name: 'ECDSA', namedCurve: 'P-384' }, sign: { name: 'ECDSA', hash: 'SHA-384' } },
  Ed25519: { gen: { name: 'Ed25519' }, sign: { name: 'Ed25519' } },
  'RSA-2048': {
    gen: {
      name: 'RSASSA-PKCS1-v1_5',
      modulusLength: 2048,
      publicExponent: new Uint8Array([1, 0, 1]),
      hash: 'SHA-256',
    },
    sign: { name: 'RSASSA-PKCS1-v1_5' },
  },
  'RSA-1024': {
    gen: {
      name: 'RSASSA-PKCS1-v1_5',
      modulusLength: 1024,
      publicExponent: new Uint8Array([1, 0, 1]),
      hash: 'SHA-256',
    },
    sign: { name: 'RSASSA-PKCS1-v1_5' },
  },
};

export interface CsrOptions {
  readonly key?: CsrKey;
  /** URI SANs to ask for (none by default). */
  readonly uris?: readonly string[];
  readonly dnsNames?: readonly string[];
  readonly ca?: boolean;
  readonly keyCertSign?: boolean;
  /** EKU OIDs to ask for (no EKU extension by default). */
  readonly extendedKeyUsages?: readonly string[];
}

export const CLIENT_AUTH = '1.3.6.1.5.5.7.3.2';
export const SERVER_AUTH = '1.3.6.1.5.5.7.3.1';

/** A real PKCS#10 request over a new key the test holds, as a worker would make it (ADR 0045 §2). */
export async function makeCsr(options: CsrOptions = {}): Promise<{ csrPem: string; keyPem: string }> {
  const x509 = loadX509();
  const algorithm = ALGORITHMS[options.key ?? 'P-256'];
  const keys = (await webcrypto.subtle.generateKey(algorithm.gen as webcrypto.EcKeyGenParams, true, [
    'sign',
    'verify',
  ])) as webcrypto.CryptoKeyPair;
  const extensions: import('@peculiar/x509').Extension[] = [];
  const names = [
    ...(options.uris ?? []).map((value) => ({ type: 'url' as const, value })),
    ...(options.dnsNames ?? []).map((value) => ({ type: 'dns' as const, value })),
  ];
  if (names.length) extensions.push(new x509.SubjectAlternativeNameExtension(names));
  if (options.ca !== undefined)
    extensions.push(new x509.BasicConstraintsExtension(options.ca, undefined, true));
  if (options.keyCertSign)
    extensions.push(
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature | x509.KeyUsageFlags.keyCertSign),
    );
  if (options.extendedKeyUsages)
    extensions.push(new x509.ExtendedKeyUsageExtension([...options.extendedKeyUsages]));
  const csr = await x509.Pkcs10CertificateRequestGenerator.create({
    name: 'CN=whatever-the-worker-says',
    keys,
    signingAlgorithm: algorithm.sign as webcrypto.EcdsaParams,
    extensions,
  });
  const der = await webcrypto.subtle.exportKey('pkcs8', keys.privateKey);
  return { csrPem: csr.toString('pem'), keyPem: `${x509.PemConverter.encode(der, 'PRIVATE KEY')}\n` };
}

/** The same CSR with one byte of its signature flipped: a broken self-signature. */
export function breakSignature(csrPem: string): string {
  const x509 = loadX509();
  const der = Buffer.from(new x509.Pkcs10CertificateRequest(csrPem).rawData);
  der[der.length - 3] ^= 0x01;
  return x509.PemConverter.encode(der, 'CERTIFICATE REQUEST');
}
