import type { WorkerCertificateRecord, WorkerCertificateSigner } from './worker-certificates';
import { RefusedError, ValidationError, outOfRange } from './errors';
import { parseWorkerId } from './ids';
import { AuditEntry } from './ports';
import { readInt, readObject, readString } from './strict';

/**
 * Enrollment tokens (ADR 0045 §1, issue 18): what a new worker machine holds to join, instead of a
 * long-lived certificate. `qlet_` + 32 random bytes as base64url; only its SHA-256 is stored. A token
 * names one worker id, or a pattern with one `*` and a count of worker ids it may enroll.
 */
export const ENROLLMENT_TOKEN_PATTERN = /^qlet_[A-Za-z0-9_-]{43}$/;

export const ENROLLMENT_LIMITS = {
  /** Lifetime of a token in seconds: default 1 h, at least 1 min, at most 7 d. */
  ttlDefaultSeconds: 3600,
  ttlMinSeconds: 60,
  ttlMaxSeconds: 7 * 24 * 3600,
  /** Worker ids one pattern token may enroll. */
  patternMaxWorkers: 1000,
  /** A pattern's `*` stands for at least one character of a worker id (63 at most). */
  patternMaxLength: 63,
} as const;

/**
 * `router-*`, `*-edge`, `lab-*-gpu`: the characters of a worker id and exactly one `*`, with at least
 * one literal character (a bare `*` would enroll any id). Matched as a prefix and a suffix, never as
 * a regular expression.
 */
export const ENROLLMENT_WORKER_PATTERN = /^(?=.{2,63}$)(?:[a-z0-9][a-z0-9-]*)?\*[a-z0-9-]*$/;

/** Whether `workerId` (already a valid worker id) is one of the ids `pattern` names. */
export function enrollmentPatternMatches(pattern: string, workerId: string): boolean {
  const star = pattern.indexOf('*');
  const prefix = pattern.slice(0, star);
  const suffix = pattern.slice(star + 1);
  return (
    workerId.length > prefix.length + suffix.length &&
    workerId.startsWith(prefix) &&
    workerId.endsWith(suffix)
  );
}

/** What `POST /api/v1/enrollment-tokens` (or the CLI) asks for, checked. */
export interface EnrollmentTokenSpec {
  /** Exactly one of `workerId` and `pattern` is set. */
  readonly workerId: string | null;
  readonly pattern: string | null;
  /** 1 for a worker id; 1…1000 for a pattern. */
  readonly maxWorkers: number;
  readonly ttlSeconds: number;
  /**
   * A pattern token enrolls only ids without a current certificate or live session, unless this
   * says it may replace them (issue 27 item 10). False for a worker-id token, which names its id.
   */
  readonly mayReplace: boolean;
}

export const ENROLLMENT_SPEC_FIELDS = ['workerId', 'pattern', 'count', 'ttlSeconds', 'mayReplace'] as const;

/** The one reader of a token request, for the API (after its DTO) and the CLI alike. */
export function parseEnrollmentTokenSpec(body: unknown): EnrollmentTokenSpec {
  const b = readObject(body, '', ENROLLMENT_SPEC_FIELDS);
  const ttlSeconds =
    b.ttlSeconds === undefined
      ? ENROLLMENT_LIMITS.ttlDefaultSeconds
      : readInt(b.ttlSeconds, 'ttlSeconds', ENROLLMENT_LIMITS.ttlMinSeconds, ENROLLMENT_LIMITS.ttlMaxSeconds);
  if ((b.workerId === undefined) === (b.pattern === undefined))
    throw new ValidationError('workerId', 'exactly_one_of_workerId_or_pattern');
  if (b.workerId !== undefined) {
    if (b.count !== undefined) throw new ValidationError('count', 'only_with_pattern');
    if (b.mayReplace !== undefined) throw new ValidationError('mayReplace', 'only_with_pattern');
    return {
      workerId: parseWorkerId(b.workerId),
      pattern: null,
      maxWorkers: 1,
      ttlSeconds,
      mayReplace: false,
    };
  }
  const pattern = readString(b.pattern, 'pattern', {
    max: ENROLLMENT_LIMITS.patternMaxLength,
    pattern: ENROLLMENT_WORKER_PATTERN,
  });
  if (b.count === undefined) throw new ValidationError('count', 'required_with_pattern');
  const maxWorkers = readInt(b.count, 'count', 1, ENROLLMENT_LIMITS.patternMaxWorkers);
  if (b.mayReplace !== undefined && typeof b.mayReplace !== 'boolean')
    throw new ValidationError('mayReplace', 'must_be_boolean');
  return { workerId: null, pattern, maxWorkers, ttlSeconds, mayReplace: b.mayReplace === true };
}

/** `30m`, `1h`, `7d`, `90s` or plain seconds (the CLI's `--ttl`), as seconds within the limits. */
export function parseTtl(value: string, field = 'ttl'): number {
  const m = /^([1-9][0-9]{0,6})([smhd]?)$/.exec(value);
  if (!m) throw new ValidationError(field, 'must_be_a_duration_like_30m_1h_7d');
  const seconds =
    Number(m[1]) * { '': 1, s: 1, m: 60, h: 3600, d: 86400 }[m[2] as '' | 's' | 'm' | 'h' | 'd'];
  if (seconds < ENROLLMENT_LIMITS.ttlMinSeconds || seconds > ENROLLMENT_LIMITS.ttlMaxSeconds)
    throw outOfRange(field, ENROLLMENT_LIMITS.ttlMinSeconds, ENROLLMENT_LIMITS.ttlMaxSeconds);
  return seconds;
}

/**
 * Why a token does not enroll a worker id; one code each (wire codes: never rename one). Unknown,
 * malformed, expired and revoked are the same code, so a probe learns nothing from it. The worker's
 * own state is judged only for a token good for that id: a disabled worker (as renewal refuses it),
 * and an id that has a current certificate or a live session, for a pattern token without `mayReplace`.
 */
export const ENROLLMENT_REFUSALS = [
  'enrollment_token_invalid',
  'enrollment_token_wrong_worker',
  'enrollment_token_exhausted',
  'enrollment_token_used',
  'enrollment_token_may_not_replace',
  'worker_disabled',
] as const;
export type EnrollmentRefusal = (typeof ENROLLMENT_REFUSALS)[number];

/** What a refusal of the worker's own state tells it to do; the token's refusals say only their code. */
const ENROLLMENT_REFUSAL_MESSAGES: Partial<Record<EnrollmentRefusal, string>> = {
  enrollment_token_may_not_replace:
    'this worker id has a current certificate or a live session: a pattern token enrolls it only when made with mayReplace (or enroll it with a token for this id)',
  worker_disabled: 'this worker is disabled: an admin enables it first',
};

/**
 * A token refused for a worker id: nothing was written (the caller audits it, ADR 0045). The ingress
 * answers 403 when the token is no good, 409 when it was, for this id or its count.
 */
export class EnrollmentRefusedError extends RefusedError {
  declare readonly code: EnrollmentRefusal;
  constructor(
    code: EnrollmentRefusal,
    /** The stored token's id; null when no stored token has that digest. */
    readonly tokenId: string | null = null,
  ) {
    super(code, ENROLLMENT_REFUSAL_MESSAGES[code] ?? `enrollment refused: ${code}`);
  }
}

export const ENROLLMENT_TOKEN_STATUSES = ['active', 'expired', 'revoked', 'exhausted'] as const;
export type EnrollmentTokenStatus = (typeof ENROLLMENT_TOKEN_STATUSES)[number];

/** A token as the admin API lists it: never the token or its digest. */
export interface EnrollmentTokenRecord {
  readonly id: string;
  readonly workerId: string | null;
  readonly pattern: string | null;
  readonly maxWorkers: number;
  /** Worker ids it enrolled so far. */
  readonly uses: number;
  /** By the database clock when read: revoked, else expired, else exhausted (uses = maxWorkers), else active. */
  readonly status: EnrollmentTokenStatus;
  readonly expiresAt: number;
  readonly revokedAt: number | null;
  /** A pattern token that may enroll an id with a current certificate or a live session. */
  readonly mayReplace: boolean;
  /** The API key id that made it, or `cli`. */
  readonly createdBy: string;
  readonly createdAt: number;
}

/** One worker id a token enrolled (a row of `enrollment_token_uses`). */
export interface EnrollmentTokenUse {
  readonly tokenId: string;
  readonly workerId: string;
  readonly at: number;
}

export interface EnrollmentTokenRepository {
  /** Makes the token, stores its digest and the audit entry in one transaction; the token is returned once. */
  create(
    token: { readonly id: string; readonly spec: EnrollmentTokenSpec; readonly createdBy: string },
    audit: AuditEntry,
  ): Promise<{ readonly token: string; readonly record: EnrollmentTokenRecord }>;
  /** Keyset page by id (ascending). */
  list(query: { readonly afterId?: string; readonly limit: number }): Promise<EnrollmentTokenRecord[]>;
  /** Idempotent (the first time stays); NotFoundError for an unknown id. */
  revoke(id: string, audit: AuditEntry): Promise<EnrollmentTokenRecord>;
  /**
   * Enrolls `workerId` with `token` at `at` (epoch ms): digest, expiry, revocation, worker id or
   * pattern, single use per worker id and the pattern's count are checked and the use recorded in one
   * transaction under the token's row lock, with its audit row. A refusal rejects with
   * EnrollmentRefusedError after committing only its audit row; a malformed worker id is a
   * ValidationError and writes nothing. With `sign`, the certificate it signs is recorded as the
   * worker's current one in the same transaction (ADR 0045 §2, §4): when signing fails, the use is
   * rolled back with it and the token stays unused.
   */
  consume(
    workerId: string,
    token: string,
    at: number,
    sign?: WorkerCertificateSigner,
  ): Promise<EnrollmentTokenUse & { readonly certificate?: WorkerCertificateRecord }>;
}
export const ENROLLMENT_TOKEN_REPOSITORY = Symbol('EnrollmentTokenRepository');
