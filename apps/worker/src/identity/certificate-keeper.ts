import { KeyObject, X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import {
  ContractError,
  IssuedCertificateResponse,
  buildCertificateRequest,
  buildEnrollRequest,
  readIssuedCertificate,
} from '@ql/contracts';
import type { WorkerConfig } from '../config/worker-config';
import { IngressCallError, IngressCallOptions } from '../ingress-client/worker-ingress-https.client';
import { RepeatedFailureLog } from '../logging/repeated-failure';
import type { WorkerLog } from '../logging/worker-log';
import {
  describeError,
  isCertificateRevoked,
  isRetryable,
  pause,
  startRetryPauseMs,
} from '../runs/lease-channel';
import { unlinkQuietly } from '../journal/durable-files';
import { CertificateFiles, CurrentCertificate, describe } from './certificate-files';
import { buildCsr, newWorkerKey } from './csr';

/** Why the worker must end for its identity (ADR 0045, 0055: exit codes 5–8 and 11 of WORKER_EXIT). */
export type IdentityLoss =
  | 'certificate_expired'
  | 'certificate_superseded'
  | 'enrollment_refused'
  | 'worker_disabled'
  /** `certificate_revoked`: exit 11, the certificate put aside; a new token enrolls again (ADR 0055). */
  | 'certificate_revoked'
  /** Any other refusal of a renewal while running (a revoked certificate): exit 1, the code printed. */
  | 'certificate_refused';

/** The worker's certificate can no longer serve it; the message says what the operator does. */
export class IdentityLostError extends Error {
  override readonly name = 'IdentityLostError';
  constructor(
    readonly loss: IdentityLoss,
    message: string,
    /** The control plane's refusal code, when it refused. */
    readonly code?: string,
  ) {
    super(message);
  }
}

/** The calls of the HTTPS client the keeper makes (a fake in unit tests). */
export interface CertificateCalls {
  enroll(body: unknown, caPem: Buffer, options?: IngressCallOptions): Promise<unknown>;
  renewCertificate(body: unknown, options?: IngressCallOptions): Promise<unknown>;
}

/** The first pause before a failed renewal is sent again; doubling up to the max. */
export const RENEW_RETRY_FIRST_MS = 1000;
export const RENEW_RETRY_MAX_MS = 60_000;

/** Refusals of a renewal that mean "this certificate is not one the control plane rotates": keep it. */
const NOT_ROTATED = ['certificate_unknown', 'enrollment_disabled'];

/** What the exit line says when enrollment refused a disabled worker (renewal says its own). */
export const ENROLLMENT_OF_DISABLED = 'its enrollment was refused';

/** The enrollment route's refusals of the token (exit 8, the code printed). */
const TOKEN_REFUSALS = [
  'enrollment_token_invalid',
  'enrollment_token_wrong_worker',
  'enrollment_token_used',
  'enrollment_token_exhausted',
  'enrollment_token_may_not_replace',
];

/**
 * The worker's side of ADR 0045: enrollment with `QL_WORKER_ENROLL_TOKEN` when it has no usable
 * certificate, a renewal at every start before register, and one at `QL_WORKER_CERT_RENEW_AT_PERCENT`
 * of the certificate's remaining life while it runs, each over a new key that never leaves the
 * machine. Renewals run beside the session (never in its call chain): a renewal that fails for want
 * of an answer is sent again with backoff, the session and runs go on with the current certificate.
 */
export class CertificateKeeper {
  private readonly files: CertificateFiles;
  private readonly stopped = new AbortController();
  private timer: NodeJS.Timeout | undefined;
  /** The certificate held now; `rotated` false for a certificate this control plane does not issue. */
  private held:
    { readonly current: CurrentCertificate; readonly obtainedAtMs: number; rotated: boolean } | undefined;
  private readonly lost: Promise<IdentityLostError>;
  private announceLost!: (error: IdentityLostError) => void;

  constructor(
    private readonly config: WorkerConfig,
    private readonly calls: CertificateCalls,
    /** Told at once when new files are in place, so the next call uses them. */
    private readonly recheck: () => void,
    private readonly log: WorkerLog,
    private readonly now: () => number = Date.now,
  ) {
    this.files = new CertificateFiles(config.tlsCertPath, config.tlsKeyPath);
    this.lost = new Promise((resolve) => (this.announceLost = resolve));
  }

  /** Resolves once if a renewal while running finds the identity gone; the owner exits. */
  whenLost(): Promise<IdentityLostError> {
    return this.lost;
  }

  /** Where a revoked certificate is put aside (ADR 0055). */
  get revokedPath(): string {
    return this.files.revokedPath;
  }

  /** The certificate's fingerprint now (undefined before `prepare`). */
  get fingerprint(): string | undefined {
    return this.held?.current.fingerprint;
  }

  /**
   * Before register: finish or replay an interrupted renewal, enroll when there is no usable
   * certificate and a token is given, else renew the one there is (ADR 0045 §4: every start).
   * Rejects with `IdentityLostError` for an expired certificate, a superseded one, a refused token
   * or a disabled worker; with the `IngressCallError` for any other refusal; not at all for a
   * certificate the control plane does not rotate (a hand-made one: it is used as it is).
   */
  async prepare(signal: AbortSignal): Promise<void> {
    const pending = this.files.readPendingKey();
    if (pending && this.files.certificateIsFor(pending)) this.files.finishPending();
    const current = this.files.read();
    const token = this.config.enrollToken;
    if (typeof current === 'string' || current.notAfterMs <= this.now()) {
      const why = this.files.wasRevoked() ? 'revoked' : typeof current === 'string' ? current : 'expired';
      if (token) return this.enroll(token, signal, why);
      if (why === 'revoked') throw revokedLoss(this.config.workerId, this.files.revokedPath);
      if (typeof current === 'string') return; // register says what is missing, as before
      throw expired(this.config.workerId, current);
    }
    this.held = { current, obtainedAtMs: this.now(), rotated: true };
    try {
      // Before a session, an unreachable control plane is register's outage (ADR 0040): one warning,
      // summaries with growing spacing, one recovery line, whichever call of the start meets it.
      await this.renew(signal, new RepeatedFailureLog(this.log, 'register'), this.files.readPendingKey());
    } catch (error) {
      // Revoked while it was stopped: not a usable certificate; a token given enrolls anew (ADR 0055).
      if (!(error instanceof IdentityLostError && error.loss === 'certificate_revoked') || !token)
        throw error;
      this.retireRevoked();
      return this.enroll(token, signal, 'revoked');
    }
    if (token)
      this.log.info(
        `${this.config.enrollTokenFile ? 'QL_WORKER_ENROLL_TOKEN_FILE' : 'QL_WORKER_ENROLL_TOKEN'} is set but the worker holds a usable certificate: not enrolling`,
      );
  }

  /** ADR 0055: the revoked certificate put aside, so neither this worker nor a supervisor takes it for usable. */
  retireRevoked(): void {
    this.stop();
    this.files.retire();
    this.log.warn('revoked worker certificate put aside', { path: this.files.revokedPath });
  }

  /** After register: renew at the configured share of the certificate's life, then again, and so on. */
  startRenewing(): void {
    if (!this.held?.rotated || this.stopped.signal.aborted) return;
    const { current, obtainedAtMs } = this.held;
    const share = this.config.certRenewAtPercent / 100;
    const at = obtainedAtMs + share * Math.max(0, current.notAfterMs - obtainedAtMs);
    clearTimeout(this.timer);
    const delay = Math.min(Math.max(0, at - this.now()), 2 ** 31 - 1);
    this.timer = setTimeout(() => void this.renewWhileRunning(), delay);
    this.timer.unref();
  }

  stop(): void {
    clearTimeout(this.timer);
    if (!this.stopped.signal.aborted) this.stopped.abort();
  }

  private async renewWhileRunning(): Promise<void> {
    const signal = this.stopped.signal;
    try {
      await this.renew(signal, new RepeatedFailureLog(this.log, 'certificate renewal'));
      this.startRenewing();
    } catch (error) {
      if (signal.aborted) return;
      const loss =
        error instanceof IdentityLostError
          ? error
          : new IdentityLostError(
              'certificate_refused',
              `certificate renewal refused (${codeOf(error)}): ${error instanceof Error ? error.message : String(error)}; ` +
                `enroll the machine again with a new token (npm run enroll-token -- create --worker ${this.config.workerId})`,
              codeOf(error),
            );
      this.stop();
      this.log.error(loss.message, { loss: loss.loss, ...(loss.code ? { code: loss.code } : {}) });
      this.announceLost(loss);
    }
  }

  /**
   * One renewal over mTLS with the current files: the CSR of `replay` (a key whose renewal was sent
   * before a crash), else of a new key written to `<key>.pending` first. The same CSR is sent again
   * with backoff while no answer comes (the session goes on meanwhile), until the certificate expires;
   * a refusal is thrown.
   */
  private async renew(signal: AbortSignal, failures: RepeatedFailureLog, replay?: KeyObject): Promise<void> {
    const privateKey = this.keyToSend(replay);
    const body = buildCertificateRequest({ csr: buildCsr(this.config.workerId, privateKey) });
    for (let pauseMs = RENEW_RETRY_FIRST_MS; ; pauseMs = Math.min(pauseMs * 2, RENEW_RETRY_MAX_MS)) {
      let answer: unknown;
      try {
        answer = await this.calls.renewCertificate(body, { signal });
      } catch (error) {
        if (!(error instanceof IngressCallError)) throw error;
        if (!isRetryable(error) || isNotRotated(error)) failures.succeeded(); // it answered
        if (isNotRotated(error)) {
          // A hand-made certificate, or no issuer: used as it is, not renewed by this process.
          this.held!.rotated = false;
          unlinkQuietly(this.files.pendingKeyPath);
          this.log.info(
            'certificate not renewed: the control plane does not rotate it',
            describeError(error),
          );
          return;
        }
        if (error.code === 'certificate_superseded') throw superseded(this.config.workerId, error);
        if (isCertificateRevoked(error))
          throw revokedLoss(this.config.workerId, this.files.revokedPath, error.message);
        if (error.code === 'worker_disabled')
          throw new IdentityLostError('worker_disabled', error.message, error.code);
        if (!isRetryable(error) || signal.aborted) throw error;
        const notAfterMs = this.held!.current.notAfterMs;
        const waitMs = Math.min(startRetryPauseMs(error, pauseMs), notAfterMs - this.now());
        if (waitMs <= 0) throw expired(this.config.workerId, this.held!.current);
        failures.failed({
          retryInMs: waitMs,
          notAfter: new Date(notAfterMs).toISOString(),
          ...describeError(error),
        });
        await pause(waitMs, signal);
        if (signal.aborted) throw error;
        continue;
      }
      failures.succeeded();
      return this.install(answer, privateKey, 'renewed');
    }
  }

  /** `replay` (a key whose CSR was sent before, its answer lost), else a new key written to `<key>.pending` first. */
  private keyToSend(replay: KeyObject | undefined): KeyObject {
    if (replay) return replay;
    const made = newWorkerKey();
    this.files.writePendingKey(made.keyPem);
    return made.privateKey;
  }

  /** Joining (ADR 0045 §2): a new key, its CSR and the token over server-authenticated TLS. */
  private async enroll(token: string, signal: AbortSignal, why: string): Promise<void> {
    // The key of an enrollment whose answer was lost (a crash, a timeout) is sent again: the control
    // plane answers a used token with the certificate it issued for that key.
    const privateKey = this.keyToSend(this.files.readPendingKey());
    const caPem = readFileSync(this.config.tlsCaPath);
    const body = buildEnrollRequest({
      workerId: this.config.workerId,
      token,
      csr: buildCsr(this.config.workerId, privateKey),
    });
    this.log.info('worker enrolling with its token', { why });
    let answer: unknown;
    try {
      answer = await this.calls.enroll(body, caPem, { signal });
    } catch (error) {
      // A disabled worker is refused enrollment as renewal (exit 5): a new token would not help.
      if (error instanceof IngressCallError && error.code === 'worker_disabled')
        throw new IdentityLostError('worker_disabled', ENROLLMENT_OF_DISABLED, error.code);
      if (error instanceof IngressCallError && TOKEN_REFUSALS.includes(error.code)) {
        throw new IdentityLostError(
          'enrollment_refused',
          `enrollment refused: ${error.code} (${error.message}); ask an admin for a new token (npm run enroll-token -- create --worker ${this.config.workerId})`,
          error.code,
        );
      }
      throw error;
    }
    this.install(answer, privateKey, 'enrolled');
  }

  /** The answer checked (this worker, the key sent), written, and the client told. */
  private install(answer: unknown, privateKey: KeyObject, what: 'enrolled' | 'renewed'): void {
    const issued = readIssued(
      what === 'enrolled' ? 'enroll' : 'certificate',
      answer,
      this.config.workerId,
      privateKey,
    );
    this.files.commit(issued.certificatePem + issued.chainPem);
    this.recheck();
    const current = describe(new X509Certificate(issued.certificatePem));
    this.held = { current, obtainedAtMs: this.now(), rotated: true };
    this.log.info(`worker certificate ${what}`, {
      fingerprint: current.fingerprint,
      notAfter: new Date(current.notAfterMs).toISOString(),
    });
  }
}

function isNotRotated(error: unknown): boolean {
  return error instanceof IngressCallError && NOT_ROTATED.includes(error.code);
}

function codeOf(error: unknown): string {
  return error instanceof IngressCallError ? error.code : error instanceof Error ? error.name : 'unknown';
}

function expired(workerId: string, current: CurrentCertificate): IdentityLostError {
  return new IdentityLostError(
    'certificate_expired',
    `the worker certificate expired at ${new Date(current.notAfterMs).toISOString()} and cannot be renewed: ` +
      `enroll again with a new token (npm run enroll-token -- create --worker ${workerId}, then start the worker with it in QL_WORKER_ENROLL_TOKEN or QL_WORKER_ENROLL_TOKEN_FILE)`,
  );
}

/** ADR 0055: what a revoked worker says on its way out (exit 11), naming the step that brings it back. */
export function revokedLoss(workerId: string, revokedPath: string, detail?: string): IdentityLostError {
  return new IdentityLostError(
    'certificate_revoked',
    `the certificate of ${workerId} has been revoked${detail ? ` (${detail})` : ''}; it is put aside as ${revokedPath}. ` +
      `Start the worker with a new token (npm run enroll-token -- create --worker ${workerId}) to enroll again`,
    'certificate_revoked',
  );
}

/**
 * The identity loss a failed start stands for: the keeper's own, or register refused with
 * `certificate_superseded` (ADR 0045 §4: a certificate this control plane renewed for another key,
 * presented by a worker whose start renewal it did not rotate): exit 7 either way, not 1.
 */
export function identityLossOf(
  workerId: string,
  error: unknown,
  revokedPath: string,
): IdentityLostError | undefined {
  if (error instanceof IdentityLostError) return error;
  if (error instanceof IngressCallError && error.code === 'certificate_superseded')
    return superseded(workerId, error);
  if (isCertificateRevoked(error)) return revokedLoss(workerId, revokedPath, error.message);
  return undefined;
}

function superseded(workerId: string, error: IngressCallError): IdentityLostError {
  return new IdentityLostError(
    'certificate_superseded',
    `the certificate of ${workerId} was renewed by another process: this identity was used from another machine (${error.message}); ` +
      `revoke the worker (POST /api/v1/workers/${workerId}/revoke) and enroll this machine again`,
    error.code,
  );
}

/**
 * The issued certificate, read by the contract's strict reader (ingress/issued-certificate.ts): the
 * exact fields, for this worker and over the key the worker sent; else `invalid_response`.
 */
function readIssued(
  call: 'enroll' | 'certificate',
  answer: unknown,
  workerId: string,
  privateKey: KeyObject,
): IssuedCertificateResponse {
  try {
    return readIssuedCertificate(call, answer, workerId, privateKey);
  } catch (error) {
    if (!(error instanceof ContractError)) throw error;
    throw new IngressCallError(call, 200, 'invalid_response', `the certificate answer: ${error.rule}`);
  }
}
