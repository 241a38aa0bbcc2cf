import fc from 'fast-check';
import { formatUuidV7, isUuidV7, isWorkerId } from './ids';

describe('ids (R-REG-1)', () => {
  it.each([
    ['a', true],
    ['worker-1', true],
    ['0abc', true],
    ['a'.repeat(63), true],
    ['a'.repeat(64), false],
    ['-worker', false],
    ['Worker', false],
    ['worker_1', false],
    ['', false],
    ['wörker', false],
  ])('worker id %j valid=%s', (id, ok) => expect(isWorkerId(id)).toBe(ok));

  it.each([
    ['01890a5d-ac96-774b-bcce-b302099a8057', true],
    ['01890a5d-ac96-474b-bcce-b302099a8057', false], // version 4
    ['01890a5d-ac96-774b-7cce-b302099a8057', false], // wrong variant
    ['01890A5D-AC96-774B-BCCE-B302099A8057', false], // upper case is not canonical
    ['01890a5dac96774bbcceb302099a8057', false],
  ])('session id %s valid=%s', (id, ok) => expect(isUuidV7(id)).toBe(ok));

  it('formats valid UUIDv7 that sort by their timestamp (property)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 2 ** 47 }),
        fc.integer({ min: 1, max: 2 ** 20 }),
        fc.uint8Array({ minLength: 10, maxLength: 10 }),
        (ms, delta, random) => {
          const a = formatUuidV7(ms, random);
          const b = formatUuidV7(ms + delta, random);
          expect(isUuidV7(a)).toBe(true);
          expect(a < b).toBe(true);
        },
      ),
    );
  });
});

describe('formatUuidV7 layout', () => {
  it('puts the 48-bit time first, then version 7 and variant 10, and keeps the random bits', () => {
    const random = Uint8Array.from([0xff, 0xee, 0xff, 0xdd, 1, 2, 3, 4, 5, 6]);
    expect(formatUuidV7(0x0123456789ab, random)).toBe('01234567-89ab-7fee-bfdd-010203040506');
    expect(formatUuidV7(0, new Uint8Array(10))).toBe('00000000-0000-7000-8000-000000000000');
    expect(() => formatUuidV7(2 ** 48, random)).toThrow(RangeError);
  });
});
