import { RestartBackoff } from './restart-backoff';

describe('RestartBackoff', () => {
  it('doubles from 1 s to a 30 s ceiling while runs stay short', () => {
    const backoff = new RestartBackoff();
    expect(Array.from({ length: 8 }, () => backoff.delayAfter(500))).toEqual([
      1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000, 30_000,
    ]);
  });

  it('starts again at 1 s after a run that stayed up a minute', () => {
    const backoff = new RestartBackoff();
    [1, 2, 3].forEach(() => backoff.delayAfter(0));
    expect(backoff.delayAfter(60_000)).toBe(1_000);
    expect(backoff.delayAfter(59_999)).toBe(2_000);
  });
});
