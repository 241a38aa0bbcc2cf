/**
 * The control plane's clock as the worker sees it. Lease expiries in answers are database time; a
 * worker's own clock may be minutes or years off (a router without NTP boots in 1970), so every
 * expiry is moved onto the local clock before it is compared with `Date.now()`.
 *
 * The offset comes from the `Date` header of each answer (HTTP dates have one-second resolution): the
 * server's time when it answered lies in [D, D + 1 s), so the local clock is taken to be `received −
 * (D + 1 s)` ahead of it. That errs on the early side: the worker believes a term ends at most about
 * a second (plus the round trip) before it does, never after.
 */
export class ServerClock {
  /** Local minus server time (ms), from the latest answer that carried a usable `Date`. */
  private offsetMs = 0;
  private observed = false;

  /** Records the `Date` header of an answer received at local time `receivedAtMs`. */
  observe(dateHeader: string | undefined, receivedAtMs: number): void {
    if (dateHeader === undefined) return;
    const serverMs = Date.parse(dateHeader);
    if (!Number.isFinite(serverMs)) return;
    this.offsetMs = receivedAtMs - (serverMs + 1000);
    this.observed = true;
  }

  /** True once an answer carried a usable `Date` (until then server and local time are taken as equal). */
  get synced(): boolean {
    return this.observed;
  }

  /** A server (database) time in ms, on the local clock. */
  toLocal(serverMs: number): number {
    return serverMs + this.offsetMs;
  }
}
