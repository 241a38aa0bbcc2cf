/**
 * Delays between restarts of a supervised process: `initialMs`, doubling up to `maxMs`; a run that
 * lasted `stableMs` or longer starts the sequence again (a crash an hour later is not a crash loop).
 */
export class RestartBackoff {
  private nextMs: number;

  constructor(
    private readonly initialMs = 1_000,
    private readonly maxMs = 30_000,
    private readonly stableMs = 60_000,
  ) {
    this.nextMs = initialMs;
  }

  /** The delay before the next start, given how long the run that just ended lasted. */
  delayAfter(upMs: number): number {
    if (upMs >= this.stableMs) this.nextMs = this.initialMs;
    const delay = this.nextMs;
    this.nextMs = Math.min(this.nextMs * 2, this.maxMs);
    return delay;
  }
}
