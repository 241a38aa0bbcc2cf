import { parseRetryAfter } from './retry-after';

describe('parseRetryAfter (RFC 9110)', () => {
  const now = Date.UTC(2026, 0, 1, 12, 0, 0);

  it('reads delay-seconds and an HTTP-date in the future as milliseconds', () => {
    expect(parseRetryAfter('1', now)).toBe(1000);
    expect(parseRetryAfter(' 120 ', now)).toBe(120_000);
    expect(parseRetryAfter('0', now)).toBe(0);
    expect(parseRetryAfter('Thu, 01 Jan 2026 12:00:03 GMT', now)).toBe(3000);
  });

  it('anything else is nothing: absent, repeated, negative, fractional, too long, a past date, another date shape', () => {
    for (const value of [
      undefined,
      ['1', '2'],
      '',
      '-1',
      '1.5',
      '1e3',
      '1234567890',
      'Thu, 01 Jan 2026 11:59:00 GMT',
      '2026-01-01T12:00:03Z',
    ])
      expect(parseRetryAfter(value, now)).toBeUndefined();
  });
});
