// Size: the development PKI (CA, worker issuing intermediate, server and worker certificates, their
// files and checks) is one unit an operator reads together; ADR 0020's lazy x509 loading added to it.
// tsyringe (a dependency of @peculiar/x509) throws at load time without a Reflect metadata polyfill.
import 'reflect-metadata';
import type * as X509 from '@peculiar/x509';
import {
  X509Certificate as NodeX509Certificate,
  createPrivateKey,
  randomBytes,
  webcrypto,
} from 'node:crypto';
import { promises as fs } from 'node:fs';
import * as path from 'node:path';

type CryptoKey = webcrypto.CryptoKey;
type CryptoKeyPair = webcrypto.CryptoKeyPair;

const provider = webcrypto;
let loaded: typeof X509 | undefined;

/**
 * @peculiar/x509 is loaded when a certificate is made, not when this module is: a start on a PKI that
 * already exists (every start after the first) does without it (ADR 0020).
 */
export function loadX509(): typeof X509 {
  if (!loaded) {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    loaded = require('@peculiar/x509') as typeof X509;
    loaded.cryptoProvider.set(provider);
  }
  return loaded;
}

const EC_ALGORITHM: webcrypto.EcKeyGenParams & webcrypto.EcKeyImportParams = {
  name: 'ECDSA',
  namedCurve: 'P-256',
};
const SIGNING_ALGORITHM: webcrypto.EcdsaParams = { name: 'ECDSA', hash: 'SHA-256' };
const DAY_MS = 24 * 60 * 60 * 1000;
const CLOCK_SKEW_MS = 5 * 60 * 1000;
const CA_VALID_DAYS = 3650;
const LEAF_VALID_DAYS = 365;
const WORKER_ID_PATTERN = /^[a-z0-9][a-z0-9-]{0,62}$/; // R-REG-1
const TRUST_DOMAIN_PATTERN = /^[a-z0-9._-]+$/; // SPIFFE trust domain characters
const DNS_NAME_PATTERN =
  /^(?=.{1,253}$)[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$/;

export interface PemPair {
  certPem: string;
  /** PKCS#8 "PRIVATE KEY" PEM. */
  keyPem: string;
}

export interface WorkerCertOptions {
  workerId: string;
  trustDomain: string;
  validDays?: number;
  notBefore?: Date;
  notAfter?: Date;
  /** Default true: EKU clientAuth present; false => EKU serverAuth only; 'none' => no EKU extension. */
  clientAuth?: boolean | 'none';
  /** Default false: basicConstraints cA=false; true => a CA cert used as a leaf (for negative tests). */
  isCa?: boolean;
  /** Default: isCa. isCa without keyCertSign is a CA that OpenSSL's purpose check calls "not a CA". */
  keyCertSign?: boolean;
  /** Overrides the URI SANs entirely (default: the worker's SPIFFE id); [] => no SAN extension. */
  uris?: string[];
}

export interface DevPkiPaths {
  dir: string;
  caCertPath: string;
  caKeyPath: string;
  serverCertPath: string;
  serverKeyPath: string;
  /** The intermediate that signs enrolled workers' certificates (ADR 0045 §5). */
  workerIssuerCertPath: string;
  workerIssuerKeyPath: string;
  workers: Record<string, { certPath: string; keyPath: string }>;
  /** True when the CA was created by this call. */
  created: boolean;
}

export interface EnsureDevPkiOptions {
  trustDomain: string;
  workers: string[];
  serverDnsNames?: string[];
  serverIpAddresses?: string[];
}

export function spiffeWorkerUri(trustDomain: string, workerId: string): string {
  return `spiffe://${trustDomain}/worker/${workerId}`;
}

export async function createCa(opts: { commonName?: string; validDays?: number } = {}): Promise<PemPair> {
  const x509 = loadX509();
  const keys = await generateKeyPair();
  const { notBefore, notAfter } = validity(opts.validDays ?? CA_VALID_DAYS);
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: randomSerial(),
    name: [{ CN: [opts.commonName ?? 'QingLong Development CA'] }],
    notBefore,
    notAfter,
    keys,
    signingAlgorithm: SIGNING_ALGORITHM,
    extensions: [
      new x509.BasicConstraintsExtension(true, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  return { certPem: cert.toString('pem'), keyPem: await exportKeyPem(keys.privateKey) };
}

/** A CA signed by `ca` that may sign leaves only (path length 0): the worker issuer (ADR 0045 §5). */
export async function createIntermediateCa(
  ca: PemPair,
  opts: { commonName?: string; validDays?: number } = {},
): Promise<PemPair> {
  return issueLeaf(ca, {
    commonName: opts.commonName ?? 'QingLong Development Worker Issuer',
    ...validity(opts.validDays ?? CA_VALID_DAYS),
    isCa: true,
    pathLength: 0,
    keyCertSign: true,
    extendedKeyUsages: [],
    subjectAltNames: [],
  });
}

export async function createServerCert(
  ca: PemPair,
  opts: { dnsNames: string[]; ipAddresses: string[]; commonName?: string; validDays?: number },
): Promise<PemPair> {
  const x509 = loadX509();
  const names: X509.JsonGeneralName[] = [
    ...opts.dnsNames.map((value) => ({ type: 'dns' as const, value })),
    ...opts.ipAddresses.map((value) => ({ type: 'ip' as const, value })),
  ];
  if (names.length === 0)
    throw new Error('createServerCert: at least one DNS name or IP address is required');
  return issueLeaf(ca, {
    commonName: opts.commonName ?? opts.dnsNames[0] ?? opts.ipAddresses[0]!,
    ...validity(opts.validDays ?? LEAF_VALID_DAYS),
    isCa: false,
    extendedKeyUsages: [x509.ExtendedKeyUsage.serverAuth],
    subjectAltNames: names,
  });
}

export async function createWorkerCert(ca: PemPair, opts: WorkerCertOptions): Promise<PemPair> {
  const x509 = loadX509();
  assertWorkerId(opts.workerId);
  assertTrustDomain(opts.trustDomain);
  const defaults = validity(opts.validDays ?? LEAF_VALID_DAYS, opts.notBefore);
  const uris = opts.uris ?? [spiffeWorkerUri(opts.trustDomain, opts.workerId)];
  return issueLeaf(ca, {
    commonName: opts.workerId,
    notBefore: opts.notBefore ?? defaults.notBefore,
    notAfter: opts.notAfter ?? defaults.notAfter,
    isCa: opts.isCa ?? false,
    keyCertSign: opts.keyCertSign,
    extendedKeyUsages:
      opts.clientAuth === 'none'
        ? []
        : [(opts.clientAuth ?? true) ? x509.ExtendedKeyUsage.clientAuth : x509.ExtendedKeyUsage.serverAuth],
    subjectAltNames: uris.map((value) => ({ type: 'url' as const, value })),
  });
}

/** Makes what is missing or unusable of the development PKI in `dir`, and answers where its files are. */
export async function ensureDevPki(dir: string, opts: EnsureDevPkiOptions): Promise<DevPkiPaths> {
  return (await settleDevPki(dir, opts, true))!;
}

/**
 * Whether `ensureDevPki` would make nothing (every file there, usable): it answers without loading
 * @peculiar/x509. The control plane's start asks this first and has a missing piece made by a process
 * of its own (`dev-pki-apart.ts`, ADR 0048).
 */
export async function devPkiComplete(dir: string, opts: EnsureDevPkiOptions): Promise<boolean> {
  return (await settleDevPki(dir, opts, false)) !== undefined;
}

/** `make` false: undefined as soon as something would have to be made. */
async function settleDevPki(
  dir: string,
  opts: EnsureDevPkiOptions,
  make: boolean,
): Promise<DevPkiPaths | undefined> {
  assertTrustDomain(opts.trustDomain);
  opts.workers.forEach(assertWorkerId);
  opts.serverDnsNames?.forEach(assertDnsName);
  const root = path.resolve(dir);
  const workersDir = path.join(root, 'workers');
  await ensurePrivateDir(root);
  await ensurePrivateDir(workersDir);

  const paths: DevPkiPaths = {
    dir: root,
    caCertPath: path.join(root, 'ca.crt'),
    caKeyPath: path.join(root, 'ca.key'),
    serverCertPath: path.join(root, 'server.crt'),
    serverKeyPath: path.join(root, 'server.key'),
    workerIssuerCertPath: path.join(root, 'worker-issuer.crt'),
    workerIssuerKeyPath: path.join(root, 'worker-issuer.key'),
    workers: Object.fromEntries(
      opts.workers.map((id) => [
        id,
        { certPath: path.join(workersDir, `${id}.crt`), keyPath: path.join(workersDir, `${id}.key`) },
      ]),
    ),
    created: false,
  };

  let ca = await readPair(paths.caCertPath, paths.caKeyPath);
  if (ca === undefined) {
    if ((await exists(paths.caCertPath)) && !(await exists(paths.caKeyPath))) {
      // Never replace a CA whose key went missing: certificates it issued may be deployed elsewhere.
      throw new Error(`ensureDevPki: ${paths.caCertPath} exists but ${paths.caKeyPath} is missing`);
    }
    if (!make) return undefined;
    ca = await createCa();
    await writePair(paths.caCertPath, paths.caKeyPath, ca); // key first, so a crash leaves no cert without key
    paths.created = true;
  } else {
    assertKeyMatchesCert(ca, paths.caKeyPath);
  }
  const caCert = new NodeX509Certificate(ca.certPem);

  const dnsNames = opts.serverDnsNames ?? ['localhost'];
  const ipAddresses = opts.serverIpAddresses ?? ['127.0.0.1', '::1'];
  const server = paths.created ? undefined : await readPair(paths.serverCertPath, paths.serverKeyPath);
  if (server === undefined || !serverCertUsable(server, caCert, dnsNames, ipAddresses)) {
    if (!make) return undefined;
    await writePair(
      paths.serverCertPath,
      paths.serverKeyPath,
      await createServerCert(ca, { dnsNames, ipAddresses }),
    );
  }

  const issuer = paths.created
    ? undefined
    : await readPair(paths.workerIssuerCertPath, paths.workerIssuerKeyPath);
  if (issuer === undefined || !leafUsable(issuer, caCert, (c) => c.ca)) {
    await writePair(paths.workerIssuerCertPath, paths.workerIssuerKeyPath, await createIntermediateCa(ca));
  }

  for (const workerId of opts.workers) {
    const { certPath, keyPath } = paths.workers[workerId]!;
    const existing = paths.created ? undefined : await readPair(certPath, keyPath);
    const uri = spiffeWorkerUri(opts.trustDomain, workerId);
    if (existing === undefined || !leafUsable(existing, caCert, (c) => c.subjectAltName === `URI:${uri}`)) {
      if (!make) return undefined;
      await writePair(
        certPath,
        keyPath,
        await createWorkerCert(ca, { workerId, trustDomain: opts.trustDomain }),
      );
    }
  }
  return paths;
}

interface LeafSpec {
  commonName: string;
  notBefore: Date;
  notAfter: Date;
  isCa: boolean;
  /** A CA's path length constraint (0: it signs leaves only). */
  pathLength?: number;
  keyCertSign?: boolean;
  /** [] => no EKU extension. */
  extendedKeyUsages: string[];
  subjectAltNames: X509.JsonGeneralName[];
}

async function issueLeaf(ca: PemPair, spec: LeafSpec): Promise<PemPair> {
  const x509 = loadX509();
  const caCert = new x509.X509Certificate(ca.certPem);
  const caKey = await importKeyPem(ca.keyPem);
  const keys = await generateKeyPair();
  // Reuse the CA's own key identifier so AKI always matches the issuer's SKI byte for byte.
  const caSki = caCert.getExtension(x509.SubjectKeyIdentifierExtension);
  const keyUsage =
    (spec.keyCertSign ?? spec.isCa)
      ? x509.KeyUsageFlags.digitalSignature | x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign
      : x509.KeyUsageFlags.digitalSignature;
  const extensions: X509.Extension[] = [
    new x509.BasicConstraintsExtension(spec.isCa, spec.pathLength, true),
    new x509.KeyUsagesExtension(keyUsage, true),
    await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    caSki
      ? new x509.AuthorityKeyIdentifierExtension(caSki.keyId)
      : await x509.AuthorityKeyIdentifierExtension.create(caCert.publicKey),
  ];
  if (spec.extendedKeyUsages.length > 0) {
    extensions.push(new x509.ExtendedKeyUsageExtension(spec.extendedKeyUsages, false));
  }
  if (spec.subjectAltNames.length > 0) {
    extensions.push(new x509.SubjectAlternativeNameExtension(spec.subjectAltNames, false));
  }
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: randomSerial(),
    subject: [{ CN: [spec.commonName] }],
    issuer: caCert.subjectName, // the CA's encoded Name, not a re-parsed string
    notBefore: spec.notBefore,
    notAfter: spec.notAfter,
    publicKey: keys.publicKey,
    signingKey: caKey,
    signingAlgorithm: SIGNING_ALGORITHM,
    extensions,
  });
  return { certPem: cert.toString('pem'), keyPem: await exportKeyPem(keys.privateKey) };
}

function validity(validDays: number, notBefore?: Date): { notBefore: Date; notAfter: Date } {
  if (!(validDays > 0)) throw new Error(`validDays must be positive, got ${validDays}`);
  const now = Date.now();
  const start = notBefore ?? new Date(now - CLOCK_SKEW_MS);
  return { notBefore: start, notAfter: new Date((notBefore?.getTime() ?? now) + validDays * DAY_MS) };
}

/** 16 random bytes, top bit clear (positive INTEGER) and second-highest bit set (no leading-zero stripping). */
function randomSerial(): string {
  const bytes = randomBytes(16);
  bytes[0] = (bytes[0]! & 0x7f) | 0x40;
  return bytes.toString('hex');
}

async function generateKeyPair(): Promise<CryptoKeyPair> {
  return provider.subtle.generateKey(EC_ALGORITHM, true, ['sign', 'verify']);
}

async function exportKeyPem(key: CryptoKey): Promise<string> {
  const x509 = loadX509();
  const der = await provider.subtle.exportKey('pkcs8', key);
  return `${x509.PemConverter.encode(der, 'PRIVATE KEY')}\n`;
}

async function importKeyPem(pem: string): Promise<CryptoKey> {
  // Going through Node's KeyObject accepts SEC1 "EC PRIVATE KEY" PEMs too, not just PKCS#8.
  const der = createPrivateKey(pem).export({ format: 'der', type: 'pkcs8' });
  return provider.subtle.importKey('pkcs8', der, EC_ALGORITHM, false, ['sign']);
}

function assertWorkerId(workerId: string): void {
  if (!WORKER_ID_PATTERN.test(workerId)) {
    throw new Error(`invalid worker id ${JSON.stringify(workerId)}: must match ${WORKER_ID_PATTERN}`);
  }
}

function assertTrustDomain(trustDomain: string): void {
  if (!TRUST_DOMAIN_PATTERN.test(trustDomain)) {
    throw new Error(
      `invalid trust domain ${JSON.stringify(trustDomain)}: must match ${TRUST_DOMAIN_PATTERN}`,
    );
  }
}

function assertDnsName(name: string): void {
  if (!DNS_NAME_PATTERN.test(name)) {
    throw new Error(
      `invalid server DNS name ${JSON.stringify(name)}: lower-case labels like control-plane-1`,
    );
  }
}

function assertKeyMatchesCert(pair: PemPair, keyPath: string): void {
  const fromKey = createPrivateKey(pair.keyPem).export({ format: 'jwk' });
  const fromCert = new NodeX509Certificate(pair.certPem).publicKey.export({ format: 'jwk' });
  if (fromKey.x !== fromCert.x || fromKey.y !== fromCert.y) {
    throw new Error(`ensureDevPki: ${keyPath} does not belong to the CA certificate`);
  }
}

function leafUsable(
  pair: PemPair,
  caCert: NodeX509Certificate,
  matches: (c: NodeX509Certificate) => boolean,
): boolean {
  try {
    const cert = new NodeX509Certificate(pair.certPem);
    return (
      cert.checkIssued(caCert) &&
      cert.verify(caCert.publicKey) &&
      new Date(cert.validTo).getTime() > Date.now() + DAY_MS &&
      matches(cert)
    );
  } catch {
    return false; // unparsable files are regenerated
  }
}

function serverCertUsable(
  pair: PemPair,
  caCert: NodeX509Certificate,
  dnsNames: string[],
  ips: string[],
): boolean {
  return leafUsable(
    pair,
    caCert,
    (c) =>
      dnsNames.every((name) => c.checkHost(name, { wildcards: false }) === name) &&
      ips.every((ip) => c.checkIP(ip) !== undefined),
  );
}

async function exists(file: string): Promise<boolean> {
  try {
    await fs.access(file);
    return true;
  } catch {
    return false;
  }
}

async function readPair(certPath: string, keyPath: string): Promise<PemPair | undefined> {
  try {
    const [certPem, keyPem] = await Promise.all([
      fs.readFile(certPath, 'utf8'),
      fs.readFile(keyPath, 'utf8'),
    ]);
    return { certPem, keyPem };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

async function ensurePrivateDir(dir: string): Promise<void> {
  await fs.mkdir(dir, { recursive: true, mode: 0o700 });
  await fs.chmod(dir, 0o700); // mkdir's mode is filtered by umask and ignored for existing dirs
}

async function writePair(certPath: string, keyPath: string, pair: PemPair): Promise<void> {
  await writeFileAtomic(keyPath, pair.keyPem, 0o600);
  await writeFileAtomic(certPath, pair.certPem, 0o644);
}

async function writeFileAtomic(file: string, data: string, mode: number): Promise<void> {
  const tmp = `${file}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`;
  try {
    const handle = await fs.open(tmp, 'wx', mode);
    try {
      await handle.chmod(mode); // open's mode is filtered by umask
      await handle.writeFile(data, 'utf8');
      await handle.sync();
    } finally {
      await handle.close();
    }
    await fs.rename(tmp, file);
  } catch (err) {
    await fs.rm(tmp, { force: true });
    throw err;
  }
  const dirHandle = await fs.open(path.dirname(file), 'r');
  try {
    await dirHandle.sync(); // make the rename itself durable
  } finally {
    await dirHandle.close();
  }
}
