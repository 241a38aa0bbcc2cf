import type { IncomingMessage } from 'node:http';
import type { IngressAction, LeaseCallFields, LeaseFenceFields, WireVersion } from '@ql/contracts';
import { monotonicNow } from '../host/monotonic';
import { IngressCallError, IngressResponse } from '../ingress-client/worker-ingress-https.client';

/** Lease calls: everything the run orchestration sends, besides the session's own calls. */
export type LeaseAction = Exclude<IngressAction, 'register' | 'heartbeat' | 'drain' | 'offline'>;

/**
 * The lifecycle's one serialized call chain, as the runs see it. Every lease call carries the
 * session `generation` and `expectedVersion`, which the chain adds when the call's turn comes, so a
 * heartbeat committing in between can never make it stale (a 409 would fence the worker itself).
 */
export interface LeaseChannel {
  /** The wire version of the session the calls go in (ADR 0060); absent: 2. */
  readonly wireVersion?: WireVersion;
  /**
   * `body` is built when the call's turn comes (so it carries the lease version of the latest
   * renewal); `onAnswer` runs in that same turn, before any later call is built.
   */
  leaseCall<A extends LeaseAction>(
    action: A,
    body: () => LeaseCallFields<A>,
    options?: LeaseCallOptions<A>,
  ): Promise<IngressResponse<A>>;
  /**
   * A lease expiry or deadline (database time) on this process's monotonic clock (`monotonicNow()`):
   * converted once, when its answer arrives, with the bound of that answer (ServerClock).
   */
  toLocalTime(serverMs: number): number;
  /**
   * ADR 0051: the bundle fetch, in the chain like any lease call; resolves once the answer's bytes
   * begin (the caller reads them). Absent where no bundle can be fetched (unit-test fakes).
   */
  leaseDownload?(
    body: () => LeaseCallFields<'bundle'>,
    options: { readonly signal?: AbortSignal; readonly maxBytes: number },
  ): Promise<IncomingMessage>;
}

export interface LeaseCallOptions<A extends LeaseAction> {
  readonly signal?: AbortSignal;
  /** The contract's strict parser of the answer's bytes (see `IngressCallOptions.parse`). */
  readonly parse?: (bytes: Buffer) => unknown;
  readonly onAnswer?: (answer: IngressResponse<A>) => void;
  /**
   * A long-poll pull (ADR 0019): sent at once with the session fence of that moment, on its own
   * socket and outside the chain, so the chain (heartbeats, renewals, completions) is never held
   * while the control plane holds the pull. Only for `offers`: a claim does not move the session
   * version, and the control plane serves a held pull whose version the worker's own later calls
   * moved on. A session fence in its answer fences the worker as any call's does.
   */
  readonly detached?: { readonly timeoutMs: number };
}

/** What the worker holds of one lease: its identity and the version its last answer carried. */
export interface HeldLease {
  readonly offerId: string;
  readonly leaseToken: string;
  readonly leaseGeneration: number;
  leaseVersion: number;
  /** Monotonic time (ms, `monotonicNow()`) the lease term ends at, as the last answer said. */
  termEndMs: number;
}

/** The lease part of a lease call's body (the chain adds the session fence). */
export function leaseFence(lease: HeldLease): LeaseFenceFields {
  return {
    offerId: lease.offerId,
    leaseToken: lease.leaseToken,
    leaseGeneration: lease.leaseGeneration,
    leaseVersion: lease.leaseVersion,
  };
}

/** 409 `worker_lease_fenced`: this lease is over for good (the session may well be fine). */
export function isLeaseFenced(error: unknown): error is IngressCallError {
  return error instanceof IngressCallError && error.status === 409 && error.code === 'worker_lease_fenced';
}

/** 409 `worker_session_fenced`: the whole session is over; the lifecycle ends the worker. */
export function isSessionFenced(error: unknown): error is IngressCallError {
  return error instanceof IngressCallError && error.status === 409 && !isLeaseFenced(error);
}

/** `certificate_revoked` (401 at the edge, 403 from a renewal racing the revocation): ADR 0055. */
export function isCertificateRevoked(
  error: unknown,
): error is IngressCallError & { readonly code: 'certificate_revoked' } {
  return error instanceof IngressCallError && error.code === 'certificate_revoked';
}

/** No answer reached the worker (transport, timeout, 429, 503): the same call may be sent again. */
export function isRetryable(error: unknown): boolean {
  if (!(error instanceof IngressCallError)) return false;
  if (error.status === 0) return NO_ANSWER.includes(error.code);
  return error.status === 429 || error.status >= 500;
}
const NO_ANSWER = ['transport_error', 'timeout', 'credentials_unavailable', 'length_mismatch'];

/** 429 `worker_rate_limited`: over this worker's allowance; the burst is logged once (`RateLimitLog`). */
export function isRateLimited(error: unknown): error is IngressCallError {
  return error instanceof IngressCallError && error.status === 429;
}

/**
 * The longest `Retry-After` the worker honours: a broken or hostile answer must not park a slot for
 * long (a rate limit asks for about a second, a database outage for 2 s; lease calls stop at the term).
 */
export const RETRY_AFTER_CAP_MS = 10_000;

/** What the answer's `Retry-After` asks the worker to wait (capped), or undefined when it said nothing. */
export function retryAfterOf(error: unknown): number | undefined {
  if (!(error instanceof IngressCallError) || error.retryAfterMs === undefined) return undefined;
  return Math.min(error.retryAfterMs, RETRY_AFTER_CAP_MS);
}

/**
 * The pause before a start call (register, renewal) is sent again: the backoff, or the answer's
 * `Retry-After` when longer; but a control plane that waits for `migrate` is asked again at its
 * `Retry-After`, so the worker joins soon after the operator has run it, not after a long backoff.
 */
export function startRetryPauseMs(error: unknown, backoffMs: number): number {
  const asked = retryAfterOf(error);
  if (asked !== undefined && (error as IngressCallError).reason === 'migrations_pending') return asked;
  return Math.max(backoffMs, asked ?? 0);
}

export interface TermOptions {
  /** Pause before sending a call again that got no answer (an answer's `Retry-After` goes first). */
  readonly retryMs: number;
  readonly signal: AbortSignal;
  readonly now?: () => number;
}

/**
 * One lease call; a call that got no answer is sent again, with the same content, only while the
 * lease term lasts (R-WRK-4), after the answer's `Retry-After` when it had one (ADR 0042). Any other
 * failure is the caller's to judge.
 */
export async function callInTerm<A extends LeaseAction>(
  channel: LeaseChannel,
  action: A,
  lease: HeldLease,
  extra: Omit<LeaseCallFields<A>, keyof LeaseFenceFields>,
  options: TermOptions & Pick<LeaseCallOptions<A>, 'onAnswer' | 'parse'>,
): Promise<IngressResponse<A>> {
  const now = options.now ?? monotonicNow;
  for (;;) {
    try {
      return await channel.leaseCall(
        action,
        () => ({ ...leaseFence(lease), ...extra }) as unknown as LeaseCallFields<A>,
        options,
      );
    } catch (error) {
      const waitMs = retryAfterOf(error) ?? options.retryMs;
      if (!isRetryable(error) || options.signal.aborted || now() + waitMs >= lease.termEndMs) throw error;
      await pause(waitMs, options.signal);
    }
  }
}

/** Resolves after `ms` (unref'd), or at once when `signal` aborts. */
export function pause(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    timer.unref();
    signal?.addEventListener('abort', done, { once: true });
  });
}

/**
 * A short, log-safe description of a failed call (never a body or token); `detail` is the error's
 * message, which for `control_plane_unavailable` names every origin tried and what failed there.
 */
export function describeError(error: unknown): Record<string, string | number | undefined> {
  if (error instanceof IngressCallError)
    return { status: error.status, code: error.code, reason: error.reason, detail: error.message };
  return { error: error instanceof Error ? error.message : String(error) };
}
