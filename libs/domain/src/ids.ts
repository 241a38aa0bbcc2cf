import { ValidationError } from './errors';

export const WORKER_ID_PATTERN = /^[a-z0-9][a-z0-9-]{0,62}$/;
export const UUID_LENGTH = 36;
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

const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'));

/** Formats a UUIDv7 from a millisecond timestamp and 10 random bytes (the caller supplies both). */
export function formatUuidV7(unixMs: number, random: Uint8Array): string {
  if (random.length < 10) throw new RangeError('UUIDv7 needs 10 random bytes');
  if (!Number.isSafeInteger(unixMs) || unixMs < 0 || unixMs >= 2 ** 48) throw new RangeError('UUIDv7 time');
  const hi = Math.floor(unixMs / 2 ** 16);
  const lo = unixMs % 2 ** 16;
  const r = (i: number) => random[i]!;
  const time =
    HEX[(hi >>> 24) & 0xff]! + HEX[(hi >>> 16) & 0xff]! + HEX[(hi >>> 8) & 0xff]! + HEX[hi & 0xff]!;
  return (
    `${time}-${HEX[lo >>> 8]}${HEX[lo & 0xff]}-${HEX[0x70 | (r(0) & 0x0f)]}${HEX[r(1)]}-` +
    `${HEX[0x80 | (r(2) & 0x3f)]}${HEX[r(3)]}-` +
    `${HEX[r(4)]}${HEX[r(5)]}${HEX[r(6)]}${HEX[r(7)]}${HEX[r(8)]}${HEX[r(9)]}`
  );
}
