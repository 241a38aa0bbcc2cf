import { ValidationError, isUuidV7 } from '@ql/domain';

/** Task, run and attempt ids are UUIDv7s the control plane made; anything else is refused before a lookup. */
export function parseResourceId(value: unknown, field: string): string {
  if (typeof value !== 'string' || !isUuidV7(value)) throw new ValidationError(field, 'invalid_id');
  return value;
}

/** What an `Idempotency-Key` header may hold (manual triggers, R-RUN-3). */
export const IDEMPOTENCY_KEY_PATTERN = /^[A-Za-z0-9._:-]{1,128}$/;
