import { monotonicNow } from '../host/monotonic';

/**
 * The control plane's clock as the worker sees it. Lease expiries and deadlines in answers are
 * database time; the worker keeps every term on its monotonic clock (ADR 0028), so each expiry is
 * moved onto that clock once, when its answer arrives — never compared with the wall clock.
 *
 * The offset comes from the `Date` header of the answer (one-second resolution) and the moment its
 * request was SENT: the server wrote the answer after the request left, at a server time below
 * `D + 1 s`, so `server − monotonic` is at most `D + 1 s − sent`. Taking that bound moves every
 * expiry early by the round trip plus up to a second, never late — however long the answer took on
 * its way back (with the receive time, an answer delayed 4.5 s moved the term 4.5 s late).
 *
 * Each answer's bound is valid, but a held long-poll pull's is loose by the time the control plane
 * held it (up to 20 s: an offer would seem to end that much early). So the clock uses the tightest
 * bound of the last `windowMs` (any answer on any lane: heartbeats come every few seconds). Only a
 * forward step of the control plane's own clock inside that window could make a term seem later
 * than it is, by that step, until the window passes.
 */
export class ServerClock {
  /** The tightest bound of (server time − monotonic time) in the window, and when it was taken. */
  private best: { bound: number; atMs: number } | undefined;
  /** Until an answer carried a usable `Date`, the server is taken to keep this machine's wall time. */
  private readonly unsyncedBound: number;

  constructor(
    now: { wallMs: number; monoMs: number } = { wallMs: Date.now(), monoMs: monotonicNow() },
    private readonly windowMs = 10_000,
  ) {
    this.unsyncedBound = now.wallMs - now.monoMs;
  }

  /**
   * Records the `Date` header of an answer to a request sent at monotonic time `sentAtMs`, received
   * at `receivedAtMs` (the window's clock).
   */
  observe(dateHeader: string | undefined, sentAtMs: number, receivedAtMs = monotonicNow()): void {
    if (dateHeader === undefined) return;
    const serverMs = Date.parse(dateHeader);
    if (!Number.isFinite(serverMs)) return;
    const bound = serverMs + 1000 - sentAtMs;
    if (this.best === undefined || bound <= this.best.bound || receivedAtMs - this.best.atMs > this.windowMs)
      this.best = { bound, atMs: receivedAtMs };
  }

  /** True once an answer carried a usable `Date`. */
  get synced(): boolean {
    return this.best !== undefined;
  }

  /** A server (database) time in ms, on the monotonic clock (`monotonicNow()`). */
  toLocal(serverMs: number): number {
    return serverMs - (this.best?.bound ?? this.unsyncedBound);
  }
}
