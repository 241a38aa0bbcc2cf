import type { CanonicalCapabilities } from './capabilities';

export const MAX_CONCURRENT_RUNS = 1024;
/** Session and lease generations are 32-bit columns; versions are safe integers. */
export const GENERATION_MAX = 2 ** 31 - 1;
export const VERSION_MAX = Number.MAX_SAFE_INTEGER;

/**
 * What a worker declares when it registers a session (R-REG-3); read from the wire by the `register`
 * contract (`@ql/contracts`, `ingress/register.ts`).
 */
export interface RegistrationSnapshot {
  readonly capabilities: CanonicalCapabilities;
  readonly maxConcurrentRuns: number;
  readonly availableSlots: number;
  readonly softwareVersion: string;
  readonly protocolVersion: number;
  /** SHA-256 of the canonical snapshot: same session + same digest is an idempotent replay. */
  readonly digest: string;
}

/** The fence every session-scoped call carries (R-REG-5). */
export interface SessionFence {
  readonly generation: number;
  readonly expectedVersion: number;
}
