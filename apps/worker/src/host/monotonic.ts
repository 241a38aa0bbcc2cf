import { performance } from 'node:perf_hooks';

/**
 * Milliseconds on this process's monotonic clock (CLOCK_MONOTONIC through `performance.now()`).
 * Every lease term, kill time and deadline the worker keeps is on this clock: it never steps when
 * the wall clock does (an NTP correction, a router's first sync after booting in 1970), and it keeps
 * counting while the process is stopped (SIGSTOP), so a frozen worker wakes up knowing the term
 * passed. `Date.now()` is for logs and journal timestamps only (ADR 0028).
 */
export function monotonicNow(): number {
  return performance.now();
}
