/** A small error hierarchy: every error the domain raises has a stable, low-cardinality code. */
export abstract class DomainError extends Error {
  abstract readonly kind: 'validation' | 'fenced' | 'conflict' | 'not_found' | 'refused' | 'unavailable';
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

/** Input that breaks a rule: bad shape, unknown field, over a limit. Nothing was written. */
export class ValidationError extends DomainError {
  readonly kind = 'validation' as const;
  constructor(
    readonly field: string,
    readonly rule: string,
    message?: string,
  ) {
    super(message ?? `${field}: ${rule}`);
  }
}

/**
 * A number outside its bounds: the rule stays the stable code `out_of_range`, the message names the
 * allowed range (`limit: out_of_range (allowed 1..200)`) so a caller can fix the request.
 */
export function outOfRange(field: string, min: number, max: number): ValidationError {
  return new ValidationError(field, 'out_of_range', `${field}: out_of_range (allowed ${min}..${max})`);
}

/** Why a session, lease or worker claim is refused. Values are wire codes: never rename one. */
export const FENCE_REASONS = [
  'unknown_worker',
  'worker_disabled',
  'session_replaced',
  'session_offline',
  'session_expired',
  'generation_mismatch',
  'version_mismatch',
  'session_content_mismatch',
  'session_fenced',
  'lease_not_found',
  'lease_not_active',
  'lease_expired',
  'lease_token_mismatch',
  'lease_generation_mismatch',
  'lease_version_mismatch',
  'offer_conflict',
  'attempt_started',
  'attempt_not_starting',
  'attempt_not_running',
  'attempt_finished',
  'acknowledgement_mismatch',
  'log_sequence_gap',
  'log_chunk_mismatch',
] as const;
export type FenceReason = (typeof FENCE_REASONS)[number];

/** A claim from a replaced, expired or mismatched session: fail closed (409). */
export class FencedError extends DomainError {
  readonly kind = 'fenced' as const;
  constructor(
    readonly area: 'session' | 'lease',
    readonly reason: FenceReason,
    message?: string,
  ) {
    super(message ?? `${area} fenced: ${reason}`);
  }
  get code(): string {
    return `worker_${this.area}_fenced`;
  }
}

export class NotFoundError extends DomainError {
  readonly kind = 'not_found' as const;
  constructor(
    readonly resource: string,
    message?: string,
  ) {
    super(message ?? `${resource} not found`);
  }
}

export class ConflictError extends DomainError {
  readonly kind = 'conflict' as const;
  constructor(
    readonly reason: string,
    message?: string,
  ) {
    super(message ?? reason);
  }
}

/**
 * A request a rule refuses for the state it finds: a disabled worker, a revoked, unknown or superseded
 * certificate, an enrollment token that does not enroll this id, secrets that cannot be delivered.
 * `code` is the wire code (never rename one) and `reason` the rule where a code has several; the
 * edge gives each code its status (`http/ingress-errors.ts`), the rule stays here.
 */
export class RefusedError extends DomainError {
  readonly kind = 'refused' as const;
  constructor(
    readonly code: string,
    message: string,
    readonly reason?: string,
  ) {
    super(message);
  }
}

/** A transient storage condition that survived its bounded retry (e.g. SQLITE_BUSY). */
export class UnavailableError extends DomainError {
  readonly kind = 'unavailable' as const;
  constructor(
    readonly reason: string,
    message?: string,
  ) {
    super(message ?? reason);
  }
}

/** A transition the lifecycle does not allow; a programming error, never a user error. */
export class IllegalStateError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'IllegalStateError';
  }
}
