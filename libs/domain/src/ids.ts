import { ValidationError } from './errors';

export const WORKER_ID_PATTERN = /^[a-z0-9][a-z0-9-]{0,62}$/;
/** UUID version 7 (RFC 9562): version nibble 7, variant bits 10xx; lower case only. */
export const UUID_V7_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

export function isWorkerId(value: string): boolean {
  return WORKER_ID_PATTERN.test(value);
}

export function isUuidV7(value: string): boolean {
  return UUID_V7_PATTERN.test(value);
}

export function parseWorkerId(value: unknown, field = 'workerId'): string {
  if (typeof value !== 'string' || !isWorkerId(value)) throw new ValidationError(field, 'invalid_worker_id');
  return value;
}

export function parseSessionId(value: unknown, field = 'sessionId'): string {
  if (typeof value !== 'string' || !isUuidV7(value)) throw new ValidationError(field, 'invalid_session_id');
  return value;
}

/** Formats a UUIDv7 from a millisecond timestamp and 10 random bytes (the caller supplies both). */
export function formatUuidV7(unixMs: number, random: Uint8Array): string {
  if (random.length < 10) throw new RangeError('UUIDv7 needs 10 random bytes');
  const bytes = new Uint8Array(16);
  let ms = BigInt(unixMs);
  for (let i = 5; i >= 0; i--) {
    bytes[i] = Number(ms & 0xffn);
    ms >>= 8n;
  }
  bytes.set(random.subarray(0, 10), 6);
  bytes[6] = 0x70 | (bytes[6]! & 0x0f);
  bytes[8] = 0x80 | (bytes[8]! & 0x3f);
  const hex = Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
