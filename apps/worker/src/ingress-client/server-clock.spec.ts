import { ServerClock } from './server-clock';

describe('ServerClock: lease expiries onto the local clock', () => {
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

  it('the latest answer wins; an answer without a usable Date changes nothing', () => {
    const clock = new ServerClock();
    expect(clock.synced).toBe(false);
    expect(clock.toLocal(server)).toBe(server);
    clock.observe(new Date(server).toUTCString(), server + 10_000);
    clock.observe(undefined, 0);
    clock.observe('not a date', 0);
    expect(clock.synced).toBe(true);
    expect(clock.toLocal(server)).toBe(server + 9_000);
    clock.observe(new Date(server).toUTCString(), server - 5_000);
    expect(clock.toLocal(server)).toBe(server - 6_000);
  });
});
