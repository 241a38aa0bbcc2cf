/**
 * What every lease call shares (`offers` … `bundle`, R-LSE-2..5): the offer id and lease token with
 * the session fence, the lease's own fence, and the lease projection the lease answers carry.
 */
import {
  GENERATION_MAX,
  LEASE_TOKEN_PATTERN,
  LeaseRecord,
  VERSION_MAX,
  ValidationError,
  isUuidV7,
  readInt,
  readObject,
  readString,
} from '@ql/domain';
import { SessionFenceRequest, parseSessionFence } from './session';

/** The offer id and lease token every lease call carries, with the session fence. */
export interface OfferFieldsRequest extends SessionFenceRequest {
  readonly offerId: string;
  readonly leaseToken: string;
}

/** The lease fence renew, release and every step after the offer carry (R-LSE-4). */
export interface LeaseFenceRequest extends OfferFieldsRequest {
  readonly leaseGeneration: number;
  readonly leaseVersion: number;
}

/** What the worker holds of a lease and sends after the session fence. */
export type LeaseFenceFields = Omit<LeaseFenceRequest, keyof SessionFenceRequest>;

export function readOfferFields(raw: Record<string, unknown>): OfferFieldsRequest {
  const fence = parseSessionFence(raw);
  if (typeof raw.offerId !== 'string' || !isUuidV7(raw.offerId))
    throw new ValidationError('offerId', 'invalid_offer_id');
  if (typeof raw.leaseToken !== 'string' || !LEASE_TOKEN_PATTERN.test(raw.leaseToken))
    throw new ValidationError('leaseToken', 'invalid_lease_token');
  return { ...fence, offerId: raw.offerId, leaseToken: raw.leaseToken };
}

export const LEASE_FENCE_FIELDS = [
  'generation',
  'expectedVersion',
  'offerId',
  'leaseToken',
  'leaseGeneration',
  'leaseVersion',
] as const;

/** The lease fence of a body whose other fields (`extra`) the call's reader reads itself. */
export function readLeaseFence(body: unknown, extra: readonly string[] = []): LeaseFenceRequest {
  const raw = readObject(body, '', [...LEASE_FENCE_FIELDS, ...extra]);
  return {
    ...readOfferFields(raw),
    leaseGeneration: readInt(raw.leaseGeneration, 'leaseGeneration', 1, GENERATION_MAX),
    leaseVersion: readInt(raw.leaseVersion, 'leaseVersion', 0, VERSION_MAX),
  };
}

/** The control plane's reader of a body that is the lease fence alone (renew, release, starting, secrets). */
export function parseLeaseFence(body: unknown): LeaseFenceRequest {
  return readLeaseFence(body);
}

/** The lease fence in wire order: the session fence, then the lease's. */
export function buildLeaseFence(fence: SessionFenceRequest, lease: LeaseFenceFields): LeaseFenceRequest {
  return {
    generation: fence.generation,
    expectedVersion: fence.expectedVersion,
    offerId: lease.offerId,
    leaseToken: lease.leaseToken,
    leaseGeneration: lease.leaseGeneration,
    leaseVersion: lease.leaseVersion,
  };
}

/** The lease projection an offer, a renew and a release answer carry: never the token or its digest. */
export interface OfferedLease {
  readonly offerId: string;
  readonly sessionGeneration: number;
  readonly leaseGeneration: number;
  readonly version: number;
  readonly expiresAt: string;
}

/** The control plane's side: a stored lease as the answers show it, in wire order. */
export function buildOfferedLease(lease: LeaseRecord): OfferedLease {
  return {
    offerId: lease.offerId,
    sessionGeneration: lease.sessionGeneration,
    leaseGeneration: lease.leaseGeneration,
    version: lease.version,
    expiresAt: new Date(lease.expiresAt).toISOString(),
  };
}

const INT31 = 2 ** 31 - 1;
const ISO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

export function readOfferedLease(value: unknown): OfferedLease {
  const l = readObject(value, 'lease', [
    'offerId',
    'sessionGeneration',
    'leaseGeneration',
    'version',
    'expiresAt',
  ]);
  if (typeof l.offerId !== 'string' || !isUuidV7(l.offerId))
    throw new ValidationError('lease.offerId', 'invalid_uuid');
  return {
    offerId: l.offerId,
    sessionGeneration: readInt(l.sessionGeneration, 'lease.sessionGeneration', 1, INT31),
    leaseGeneration: readInt(l.leaseGeneration, 'lease.leaseGeneration', 1, INT31),
    version: readInt(l.version, 'lease.version', 0, Number.MAX_SAFE_INTEGER),
    expiresAt: readString(l.expiresAt, 'lease.expiresAt', { max: 24, pattern: ISO_TIME }),
  };
}
