import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { INGRESS_ENROLL_PATH, ingressCertificatePath } from '@ql/contracts';
import { PemPair } from '../../apps/control-plane/src/pki';
import { makeCsr } from './csr';
import { RemoteRunHarness, type RunWorker } from './remote-run-harness';
import type { Dialect, HttpResult, TestPlane } from './test-plane';

interface Issued {
  readonly certificatePem: string;
  readonly chainPem: string;
  readonly fingerprint: string;
}

/** What a worker keeps: its key and certificate (with the chain), as it would after enrolling or renewing. */
export interface WorkerCredentials extends PemPair {
  readonly fingerprint: string;
}

const credentialsOf = (res: HttpResult, keyPem: string): WorkerCredentials => {
  if (res.status !== 200) throw new Error(`expected 200, got ${res.status} ${res.raw}`);
  const issued = res.body as Issued;
  return { certPem: issued.certificatePem + issued.chainPem, keyPem, fingerprint: issued.fingerprint };
};

/** Enrolls `workerId` through the admin API's token and the enrollment route (ADR 0045 §2). */
export async function enrollWorker(t: TestPlane, workerId: string): Promise<WorkerCredentials> {
  const token = (await t.admin('POST', '/api/v1/enrollment-tokens', { workerId })).body as { token: string };
  const { csrPem, keyPem } = await makeCsr();
  return credentialsOf(
    await t.ingress(null, INGRESS_ENROLL_PATH, { workerId, token: token.token, csr: csrPem }),
    keyPem,
  );
}

/** Renews over mTLS with `with`; a CSR over a new key unless one is given (a re-sent renewal). */
export async function renewCertificate(
  t: TestPlane,
  workerId: string,
  with_: PemPair,
  csr?: { csrPem: string; keyPem: string },
): Promise<{ res: HttpResult; csr: { csrPem: string; keyPem: string }; credentials?: WorkerCredentials }> {
  const request = csr ?? (await makeCsr());
  const res = await t.ingress(with_, ingressCertificatePath(workerId), { csr: request.csrPem });
  return {
    res,
    csr: request,
    ...(res.status === 200 ? { credentials: credentialsOf(res, request.keyPem) } : {}),
  };
}

/**
 * A test plane's settings for the dev PKI's worker issuer (ADR 0045 §5), enrollment unthrottled and
 * every refusal written in full (the per-address audit bound has a spec of its own).
 */
export const issuerEnv = (pki: { workerIssuerCertPath: string; workerIssuerKeyPath: string }) => ({
  QL_WORKER_ISSUER_CERT: pki.workerIssuerCertPath,
  QL_WORKER_ISSUER_KEY: pki.workerIssuerKeyPath,
  QL_ENROLL_RATE_PER_MINUTE: '10000',
  QL_ENROLL_AUDIT_ROWS: '1000',
});

/** Worker processes against a plane whose certificates live 5 minutes and that sees revocations at once. */
export const enrollingHarness = (dialect: Dialect, workerIds: string[] = []) =>
  RemoteRunHarness.start(dialect, workerIds, (pki) => ({
    ...issuerEnv(pki),
    QL_REVOCATION_CACHE_MS: '0',
    QL_WORKER_CERT_TTL_MS: '300000',
  }));

/** A new enrollment token for `workerId` (admin API), as an operator hands it to the machine. */
export async function newEnrollmentToken(t: TestPlane, workerId: string): Promise<string> {
  const res = await t.admin('POST', '/api/v1/enrollment-tokens', { workerId });
  if (res.status !== 201) throw new Error(`token: ${res.status} ${res.raw}`);
  return (res.body as { token: string }).token;
}

/** The files of one worker host: a folder of its own for its certificate and key (tls/), journal and runs. */
export interface WorkerMachine {
  readonly dir: string;
  readonly cert: string;
  readonly key: string;
  readonly journal: string;
  readonly runs: string;
}

/** A worker "machine" in the harness's temp folder `name`. */
export function workerMachine(h: RemoteRunHarness, name: string): WorkerMachine {
  const dir = h.folder(name);
  mkdirSync(dir, { recursive: true });
  return {
    dir,
    cert: join(dir, 'tls', 'worker.crt'),
    key: join(dir, 'tls', 'worker.key'),
    journal: join(dir, 'journal'),
    runs: join(dir, 'runs'),
  };
}

/**
 * An enrolling worker's call deadline: enrollment is one call per start (a lost answer is replayed
 * at the next start, ADR 0045), and on a loaded machine signing and the token's transaction took longer than the harness's 2 s.
 * Below the stop budget (10 s), as the worker requires.
 */
export const ENROLL_REQUEST_TIMEOUT_MS = 8_000;

/** Starts `workerId` on machine `m`: its files there (it enrolls into them when given a token). */
export function startOnMachine(
  h: RemoteRunHarness,
  workerId: string,
  m: WorkerMachine,
  env: Record<string, string> = {},
): RunWorker {
  return h.startWorker(workerId, {
    journalDir: m.journal,
    workDir: m.runs,
    env: {
      QL_WORKER_TLS_CERT: m.cert,
      QL_WORKER_TLS_KEY: m.key,
      QL_WORKER_REQUEST_TIMEOUT_MS: String(ENROLL_REQUEST_TIMEOUT_MS),
      ...env,
    },
  });
}
