import { IngressCallError } from '../ingress-client/worker-ingress-https.client';
import type { WorkerLog } from './worker-log';

/**
 * A burst of 429s ends with the first answered call this long after its latest 429: under a sustained
 * overload, calls that pass between refusals (the bucket refills a token at a time) keep it one burst.
 */
export const RATE_LIMIT_QUIET_MS = 5_000;

/**
 * ADR 0042: one warning per burst of `429 worker_rate_limited` answers, whatever the route or the
 * loop that got them, instead of one line per call (or none, as before), and one line when the burst
 * is over with how many calls were refused and for how long. Every ingress call's outcome comes here.
 */
export class RateLimitLog {
  private refusals = 0;
  private firstAt = 0;
  private lastAt = 0;

  constructor(
    private readonly log: WorkerLog,
    private readonly now: () => number = Date.now,
    private readonly quietMs = RATE_LIMIT_QUIET_MS,
  ) {}

  /** A call got an answer (2xx). */
  answered(): void {
    if (this.refusals === 0 || this.now() - this.lastAt < this.quietMs) return;
    this.log.info('control plane rate limit over', {
      refusals: this.refusals,
      limitedForMs: this.lastAt - this.firstAt,
    });
    this.refusals = 0;
  }

  /** A call failed: a 429 is part of the burst; any other answer from the control plane may end it. */
  failed(action: string, error: unknown): void {
    if (!(error instanceof IngressCallError) || error.status === 0) return; // no answer: says nothing
    if (error.status !== 429) return this.answered();
    const now = this.now();
    this.lastAt = now;
    if (this.refusals++ > 0) return;
    this.firstAt = now;
    this.log.warn('control plane rate-limits this worker; its calls wait as Retry-After says', {
      action,
      retryAfterMs: error.retryAfterMs,
    });
  }
}
