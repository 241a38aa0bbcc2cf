import { ingressAllowance, retryAfterSeconds } from './ingress-rate-limit';
import { RateLimiter } from './rate-limiter';

describe('RateLimiter: a token bucket per key with its own allowance', () => {
  let now = 0;
  const clock = () => now;
  beforeEach(() => (now = 1_000));

  it('spends the burst, then says how long until the next token; time refills it, never past the burst', () => {
    const limiter = new RateLimiter({ perSecond: 4, burst: 3 }, clock);
    expect([limiter.take('a'), limiter.take('a'), limiter.take('a')]).toEqual([0, 0, 0]);
    expect(limiter.take('a')).toBe(250);
    now += 100; // 0.4 of a token
    expect(limiter.take('a')).toBe(150);
    now += 150;
    expect(limiter.take('a')).toBe(0);
    now += 60_000;
    expect([0, 1, 2, 3].map(() => limiter.take('a'))).toEqual([0, 0, 0, 250]);
    expect(limiter.take('b')).toBe(0); // keys do not share
  });

  it('resize: a bigger bucket is topped up by what it grew; a smaller one keeps what fits', () => {
    const limiter = new RateLimiter({ perSecond: 1, burst: 2 }, clock);
    limiter.take('a');
    limiter.take('a');
    limiter.resize('a', { perSecond: 10, burst: 8 });
    expect(Array.from({ length: 7 }, () => limiter.take('a'))).toEqual([0, 0, 0, 0, 0, 0, 100]);
    limiter.resize('a', { perSecond: 1, burst: 1 });
    now += 60_000;
    expect([limiter.take('a'), limiter.take('a')]).toEqual([0, 1000]);
    // An unknown key sized before its first call starts full at its size.
    limiter.resize('c', { perSecond: 1, burst: 5 });
    expect(Array.from({ length: 6 }, () => limiter.take('c'))).toEqual([0, 0, 0, 0, 0, 1000]);
  });

  it('forgets the least recently used bucket once full: it comes back full, at the default size', () => {
    const limiter = new RateLimiter({ perSecond: 1, burst: 1 }, clock, 2);
    limiter.resize('a', { perSecond: 1, burst: 3 });
    limiter.take('a');
    limiter.take('b');
    limiter.take('c'); // evicts a
    expect([limiter.take('a'), limiter.take('a')]).toEqual([0, 1000]);
  });
});

describe('ingressAllowance (ADR 0042)', () => {
  const settings = { ingressRatePerSecond: 50, ingressRateBurst: 100, ingressRatePerSlot: 250 };

  it('grows with the slots, never below the floor settings; 0 per slot is the flat limit', () => {
    expect(ingressAllowance(settings, 1)).toEqual({ perSecond: 250, burst: 500 });
    expect(ingressAllowance(settings, 4)).toEqual({ perSecond: 1000, burst: 2000 });
    expect(ingressAllowance({ ...settings, ingressRatePerSecond: 5000 }, 4)).toEqual({
      perSecond: 5000,
      burst: 2000,
    });
    expect(ingressAllowance({ ...settings, ingressRatePerSlot: 0 }, 64)).toEqual({
      perSecond: 50,
      burst: 100,
    });
  });

  it('Retry-After is whole seconds, at least 1, never sooner than the bucket allows', () => {
    expect([1, 999, 1000, 1001, 4500].map(retryAfterSeconds)).toEqual([1, 1, 1, 2, 5]);
  });
});
