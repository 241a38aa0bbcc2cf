import type { LogFields, WorkerLog } from './worker-log';

/** The second line of an outage comes this long after the first; each later one twice as long after. */
export const FAILURE_LOG_FIRST_SPACING_MS = 1_000;
/** The longest spacing: an outage that lasts still shows one line this often. */
export const FAILURE_LOG_MAX_SPACING_MS = 5 * 60_000;

/**
 * One warning per outage instead of one per failed call (issue 16 item 11): a loop that fails every
 * tick logs its first failure (`<what> failed`), then a summary (`<what> still failing`, with how many
 * failures since the last line) 1 s, 2 s, 4 s … apart, at most 5 minutes apart, and one
 * `<what> recovered` line when a call succeeds again. Each line carries the latest failure's fields.
 */
export class RepeatedFailureLog {
  private failures = 0;
  private unlogged = 0;
  private firstAt = 0;
  private nextAt = 0;
  private spacing = FAILURE_LOG_FIRST_SPACING_MS;

  constructor(
    private readonly log: WorkerLog,
    private readonly what: string,
    private readonly now: () => number = Date.now,
  ) {}

  failed(fields: LogFields): void {
    const now = this.now();
    this.failures++;
    if (this.failures === 1) {
      this.firstAt = now;
      this.spacing = FAILURE_LOG_FIRST_SPACING_MS;
      this.nextAt = now + this.spacing;
      this.log.warn(`${this.what} failed`, fields);
      return;
    }
    this.unlogged++;
    if (now < this.nextAt) return;
    this.log.warn(`${this.what} still failing`, {
      ...fields,
      failures: this.failures,
      failuresSinceLastLine: this.unlogged,
      failingForMs: now - this.firstAt,
    });
    this.unlogged = 0;
    this.spacing = Math.min(this.spacing * 2, FAILURE_LOG_MAX_SPACING_MS);
    this.nextAt = now + this.spacing;
  }

  succeeded(fields: LogFields = {}): void {
    if (this.failures === 0) return;
    this.log.info(`${this.what} recovered`, {
      ...fields,
      failures: this.failures,
      failingForMs: this.now() - this.firstAt,
    });
    this.failures = 0;
    this.unlogged = 0;
  }
}
