import { sha256Hex } from './canonical-json';
import { ValidationError } from './errors';
import { isUuidV7 } from './ids';
import { GENERATION_MAX, SessionFence, VERSION_MAX, parseSessionFence } from './registration';
import { readInt, readObject } from './strict';

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

/** The offer id and lease token every lease call carries, with the session fence. */
export interface OfferFields extends SessionFence {
  readonly offerId: string;
  readonly leaseToken: string;
}

/** Longest a pull may ask to wait for a claimable run (long poll, ADR 0019), in ms. */
export const OFFER_WAIT_MAX_MS = 20_000;

export interface PullRequest extends OfferFields {
  /** Long poll: with nothing claimable, wait up to this long for a run (0 or absent: answer at once). */
  readonly waitMs?: number;
}

/** The lease fence renew and release carry (R-LSE-4). */
export interface LeaseFence extends OfferFields {
  readonly leaseGeneration: number;
  readonly leaseVersion: number;
}

function readOfferFields(raw: Record<string, unknown>): OfferFields {
  const fence = parseSessionFence(raw);
  if (typeof raw.offerId !== 'string' || !isUuidV7(raw.offerId))
    throw new ValidationError('offerId', 'invalid_offer_id');
  if (typeof raw.leaseToken !== 'string' || !LEASE_TOKEN_PATTERN.test(raw.leaseToken))
    throw new ValidationError('leaseToken', 'invalid_lease_token');
  return { ...fence, offerId: raw.offerId, leaseToken: raw.leaseToken };
}

export function parsePullRequest(body: unknown): PullRequest {
  const raw = readObject(body, '', ['generation', 'expectedVersion', 'offerId', 'leaseToken', 'waitMs']);
  const fields = readOfferFields(raw);
  return raw.waitMs === undefined
    ? fields
    : { ...fields, waitMs: readInt(raw.waitMs, 'waitMs', 0, OFFER_WAIT_MAX_MS) };
}

export function parseLeaseFence(body: unknown): LeaseFence {
  const raw = readObject(body, '', [
    'generation',
    'expectedVersion',
    'offerId',
    'leaseToken',
    'leaseGeneration',
    'leaseVersion',
  ]);
  return {
    ...readOfferFields(raw),
    leaseGeneration: readInt(raw.leaseGeneration, 'leaseGeneration', 1, GENERATION_MAX),
    leaseVersion: readInt(raw.leaseVersion, 'leaseVersion', 0, VERSION_MAX),
  };
}

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
