import validSemver from 'semver/functions/valid';
import { CanonicalCapabilities, canonicalizeCapabilities } from './capabilities';
import { canonicalJson, sha256Hex } from './canonical-json';
import { ValidationError } from './errors';
import { readInt, readObject, readString } from './strict';

export const MAX_CONCURRENT_RUNS = 1024;
export const SUPPORTED_PROTOCOL_VERSIONS = [3] as const;
/** The range a protocol version is read in before it is checked against the supported ones. */
export const PROTOCOL_VERSION_MAX = 1000;
export const SOFTWARE_VERSION_MAX_LENGTH = 64;
/** Session and lease generations are 32-bit columns; versions are safe integers. */
export const GENERATION_MAX = 2 ** 31 - 1;
export const VERSION_MAX = Number.MAX_SAFE_INTEGER;

/** What a worker declares when it registers a session (R-REG-3). */
export interface RegistrationSnapshot {
  readonly capabilities: CanonicalCapabilities;
  readonly maxConcurrentRuns: number;
  readonly availableSlots: number;
  readonly softwareVersion: string;
  readonly protocolVersion: number;
  /** SHA-256 of the canonical snapshot: same session + same digest is an idempotent replay. */
  readonly digest: string;
}

export function parseRegistration(body: unknown): RegistrationSnapshot {
  const raw = readObject(body, '', [
    'capabilities',
    'maxConcurrentRuns',
    'availableSlots',
    'softwareVersion',
    'protocolVersion',
  ]);
  const capabilities = canonicalizeCapabilities(raw.capabilities);
  const maxConcurrentRuns = readInt(raw.maxConcurrentRuns, 'maxConcurrentRuns', 1, MAX_CONCURRENT_RUNS);
  const availableSlots = readInt(raw.availableSlots, 'availableSlots', 0, maxConcurrentRuns);
  const softwareVersion = readString(raw.softwareVersion, 'softwareVersion', {
    max: SOFTWARE_VERSION_MAX_LENGTH,
  });
  if (validSemver(softwareVersion) !== softwareVersion)
    throw new ValidationError('softwareVersion', 'invalid_semver');
  const protocolVersion = readInt(raw.protocolVersion, 'protocolVersion', 1, PROTOCOL_VERSION_MAX);
  if (!(SUPPORTED_PROTOCOL_VERSIONS as readonly number[]).includes(protocolVersion)) {
    throw new ValidationError('protocolVersion', 'unsupported');
  }
  const digest = sha256Hex(
    canonicalJson({
      capabilitiesDigest: capabilities.digest,
      maxConcurrentRuns,
      availableSlots,
      softwareVersion,
      protocolVersion,
    }),
  );
  return { capabilities, maxConcurrentRuns, availableSlots, softwareVersion, protocolVersion, digest };
}

/** The fence every session-scoped call carries (R-REG-5). */
export interface SessionFence {
  readonly generation: number;
  readonly expectedVersion: number;
}

export function parseSessionFence(raw: Record<string, unknown>): SessionFence {
  return {
    generation: readInt(raw.generation, 'generation', 1, GENERATION_MAX),
    expectedVersion: readInt(raw.expectedVersion, 'expectedVersion', 0, VERSION_MAX),
  };
}

export interface HeartbeatRequest extends SessionFence {
  readonly availableSlots: number;
  /**
   * Journal records of the worker that wait for an operator (`recovery_required`, ADR 0029); absent
   * means 0. At most the journal's record bound.
   */
  readonly recoveryRequired?: number;
}

/** A worker journal holds at most this many records (SPEC §12), so at most this many need recovery. */
export const MAX_RECOVERY_REQUIRED = 1024;

export function parseHeartbeat(body: unknown): HeartbeatRequest {
  const raw = readObject(body, '', ['generation', 'expectedVersion', 'availableSlots', 'recoveryRequired']);
  return {
    ...parseSessionFence(raw),
    availableSlots: readInt(raw.availableSlots, 'availableSlots', 0, MAX_CONCURRENT_RUNS),
    ...(raw.recoveryRequired === undefined
      ? {}
      : { recoveryRequired: readInt(raw.recoveryRequired, 'recoveryRequired', 0, MAX_RECOVERY_REQUIRED) }),
  };
}

/** Drain and offline carry only the fence. */
export function parseFenceOnly(body: unknown): SessionFence {
  return parseSessionFence(readObject(body, '', ['generation', 'expectedVersion']));
}
