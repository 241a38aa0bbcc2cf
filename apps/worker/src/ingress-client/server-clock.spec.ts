import { ServerClock } from './server-clock';

describe('ServerClock: lease expiries onto the monotonic clock', () => {
  const server = Date.parse('2026-12-02T10:00:00.000Z');

  it('a local clock an hour behind the server sees a 30 s term ending 30 s from its own now, at most 1 s early', () => {
    const clock = new ServerClock();
    const localNow = server - 3_600_000;
    clock.observe(new Date(server).toUTCString(), localNow);
    const localExpiry = clock.toLocal(server + 30_000);
    expect(localExpiry - localNow).toBeLessThanOrEqual(30_000);
    expect(localExpiry - localNow).toBeGreaterThanOrEqual(29_000);
  });

  it('a local clock years ahead (or behind, 1970) gets the same term', () => {
    for (const localNow of [server + 5 * 365 * 86_400_000, 86_400_000]) {
      const clock = new ServerClock();
      clock.observe(new Date(server + 400).toUTCString(), localNow); // 10:00:00.400 prints as 10:00:00
      const term = clock.toLocal(server + 400 + 30_000) - localNow;
      expect(term).toBeGreaterThanOrEqual(29_000);
      expect(term).toBeLessThanOrEqual(30_000);
    }
  });

  it('keeps the tightest bound of its window; an answer without a usable Date changes nothing', () => {
    // Before any answer the server is taken to keep this machine's wall time.
    const clock = new ServerClock({ wallMs: server, monoMs: 1_234 }, 10_000);
    expect(clock.synced).toBe(false);
    expect(clock.toLocal(server + 500)).toBe(1_734);
    clock.observe(new Date(server).toUTCString(), 10_000, 10_050);
    clock.observe(undefined, 0);
    clock.observe('not a date', 0);
    expect(clock.synced).toBe(true);
    expect(clock.toLocal(server)).toBe(9_000);
    // A pull the server held 8 s: its own bound is 8 s loose; the heartbeat's tighter one stands.
    clock.observe(new Date(server + 8_000).toUTCString(), 10_100, 18_150);
    expect(clock.toLocal(server + 8_000 + 30_000)).toBe(10_000 + 8_000 + 30_000 - 1_000);
    // Past the window the latest answer's bound is taken, even a looser one.
    clock.observe(new Date(server + 20_000).toUTCString(), 25_000, 25_100);
    expect(clock.toLocal(server + 20_000)).toBe(25_000 - 1_000);
  });

  it('takes the bound from when the request was SENT: an answer delayed on its way back moves the term early, never late', () => {
    // Sent at monotonic 10 000; the server answers at once (server time `server`, a 30 s lease);
    // the answer reaches the worker 4.5 s later. The lease really ends 30 s after the server wrote
    // it, i.e. at monotonic ≤ 40 000 + network — the worker must believe no later than that.
    const sentAt = 10_000;
    const clock = new ServerClock();
    clock.observe(new Date(server).toUTCString(), sentAt);
    const believedEnd = clock.toLocal(server + 30_000);
    expect(believedEnd).toBeLessThanOrEqual(sentAt + 30_000);
    expect(believedEnd).toBe(sentAt + 29_000); // the Date header's second, and nothing else
  });
});
