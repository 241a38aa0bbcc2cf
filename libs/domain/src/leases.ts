import { sha256Hex } from './canonical-json';

/** ≥ 256 bits, base64url without padding (43 chars for 32 bytes); the worker makes it (R-LSE-1). */
export const LEASE_TOKEN_MAX_LENGTH = 128;
export const LEASE_TOKEN_PATTERN = new RegExp(`^[A-Za-z0-9_-]{43,${LEASE_TOKEN_MAX_LENGTH}}$`);

/** Only this digest is stored; the token itself is never stored, logged or returned. */
export function leaseTokenDigest(token: string): string {
  return sha256Hex(`ql-lease-token:${token}`);
}

export const LEASE_STATES = ['active', 'released', 'expired', 'completed'] as const;
export type LeaseState = (typeof LEASE_STATES)[number];

/** A run lease as stored, without its token digest. */
export interface LeaseRecord {
  readonly offerId: string;
  readonly attemptId: string;
  readonly runId: string;
  readonly workerId: string;
  readonly sessionId: string;
  readonly sessionGeneration: number;
  readonly leaseGeneration: number;
  readonly version: number;
  readonly state: LeaseState;
  readonly expiresAt: number;
  readonly claimedAt: number;
}

/** Longest a pull may ask to wait for a claimable run (long poll, ADR 0019), in ms. */
export const OFFER_WAIT_MAX_MS = 20_000;

/**
 * Why a pull found nothing to offer; wire codes of the idle response. `preferred_elsewhere`: a run
 * matched but is held for a worker with a higher preferred score (R-PLC-2), for a bounded time.
 */
export const IDLE_REASONS = [
  'no_capacity',
  'no_queued_runs',
  'no_matching_run',
  'draining',
  'preferred_elsewhere',
] as const;
export type IdleReason = (typeof IDLE_REASONS)[number];
