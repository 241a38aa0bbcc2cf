import fc from 'fast-check';
import { Capabilities, PlacementCandidate } from '@ql/domain';

/** A candidate that can take a run at `now` (online, enabled, live, 4 free slots); `over` changes any field. */
export function liveCandidate(
  workerId: string,
  capabilities: Capabilities,
  now: number,
  over: Partial<PlacementCandidate> = {},
): PlacementCandidate {
  return {
    workerId,
    capabilities,
    status: 'online',
    disabled: false,
    leaseExpiresAt: now + 10_000,
    availableSlots: 4,
    maxConcurrentRuns: 4,
    activeLeases: 0,
    ...over,
  };
}

/** Arbitraries of everything but id and capabilities: live or not, draining, disabled, full, around `now`. */
export function candidateStateArbitraries(now: number) {
  return {
    status: fc.constantFrom('online' as const, 'online' as const, 'draining' as const, 'offline' as const),
    disabled: fc.constantFrom(false, false, false, true),
    leaseExpiresAt: fc.integer({ min: now - 10, max: now + 10 }),
    availableSlots: fc.integer({ min: 0, max: 4 }),
    maxConcurrentRuns: fc.integer({ min: 1, max: 4 }),
    activeLeases: fc.integer({ min: 0, max: 4 }),
  };
}
