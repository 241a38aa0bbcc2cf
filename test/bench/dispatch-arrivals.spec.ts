import { meanBatch } from '../../bench/dispatch-arrivals';

describe('dispatch bench: the batches a coalescing window would form', () => {
  it('a batch opens at an arrival and takes every arrival within the window after it', () => {
    // 0, 1, 2 fall in the batch opened at 0; 3 opens the next one (3 - 0 > 2), which takes 5.
    expect(meanBatch([0, 1, 2, 3, 5], 2)).toBe(5 / 2);
    expect(meanBatch([0, 10, 20], 2)).toBe(1);
    expect(meanBatch([0, 0, 0, 0], 0)).toBe(4);
    expect(meanBatch([0, 1, 2, 3, 5], 5)).toBe(5);
  });

  it('no arrivals is not a figure', () => {
    expect(meanBatch([], 2)).toBeNaN();
  });
});
