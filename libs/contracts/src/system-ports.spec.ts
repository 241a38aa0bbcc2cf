import { isUuidV7 } from '@ql/domain';
import { createIdGenerator } from './system-ports';

describe('createIdGenerator', () => {
  it('ids strictly increase within one millisecond and across a counter overflow', () => {
    const clock = { now: () => 1_764_547_200_000 };
    const ids = createIdGenerator(clock);
    const made = Array.from({ length: 10_000 }, () => ids.uuidV7());
    for (const id of made) expect(isUuidV7(id)).toBe(true);
    for (let i = 1; i < made.length; i++) expect(made[i]! > made[i - 1]!).toBe(true);
  });

  it('a clock that goes back never makes an id sort before an earlier one', () => {
    let now = 2_000_000_000_000;
    const ids = createIdGenerator({ now: () => now });
    const first = ids.uuidV7();
    now -= 5_000;
    expect(ids.uuidV7() > first).toBe(true);
  });
});
