import fc from 'fast-check';
import { Capabilities, PlacementCandidate, WorkerSoftware } from '@ql/domain';

/** A worker held to v1 (`QL_WORKER_PROTOCOL_MAX=3`) as placement reads it. */
export const V1_SOFTWARE: WorkerSoftware = Object.freeze({ softwareVersion: '0.0.9', wireVersion: 1 });
/** A current worker's session as placement reads it (wire v2, this repository's version). */
export const CURRENT_SOFTWARE: WorkerSoftware = Object.freeze({ softwareVersion: '0.1.0', wireVersion: 2 });

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
    software: CURRENT_SOFTWARE,
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
    software: fc.constantFrom(CURRENT_SOFTWARE, CURRENT_SOFTWARE, V1_SOFTWARE),
  };
}
