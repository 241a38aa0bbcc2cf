import { randomBytes } from 'node:crypto';
import { Clock, IdGenerator, formatUuidV7 } from '@ql/domain';

export const systemClock: Clock = { now: () => Date.now() };

/** UUIDv7 with a monotonic millisecond part, so ids made in one process sort by creation. */
export function createIdGenerator(clock: Clock = systemClock): IdGenerator {
  let last = 0;
  return {
    uuidV7: () => {
      last = Math.max(clock.now(), last);
      return formatUuidV7(last, randomBytes(10));
    },
  };
}
