import { randomFillSync } from 'node:crypto';
import { Clock, IdGenerator, formatUuidV7 } from '@ql/domain';

export const systemClock: Clock = { now: () => Date.now() };

const COUNTER_MAX = 0xfff;

/**
 * UUIDv7 that strictly increase within one process (RFC 9562 §6.2, method 1): the 12-bit rand_a field
 * is a counter, seeded at random in its lower half each new millisecond and incremented within one;
 * on overflow the millisecond part moves on. So ids made here sort by creation (FIFO tie-breaks).
 */
export function createIdGenerator(clock: Clock = systemClock): IdGenerator {
  let lastMs = 0;
  let counter = 0;
  // Random bytes drawn 4 KiB at a time: one system call per ~400 ids instead of one per id.
  const pool = Buffer.alloc(4096);
  let used = pool.length;
  return {
    uuidV7: () => {
      const now = clock.now();
      if (used + 10 > pool.length) {
        randomFillSync(pool);
        used = 0;
      }
      const random = pool.subarray(used, used + 10);
      used += 10;
      if (now > lastMs) {
        lastMs = now;
        counter = ((random[0]! << 8) | random[1]!) & 0x7ff;
      } else if (++counter > COUNTER_MAX) {
        lastMs += 1;
        counter = 0;
      }
      random[0] = counter >> 8;
      random[1] = counter & 0xff;
      return formatUuidV7(lastMs, random);
    },
  };
}
