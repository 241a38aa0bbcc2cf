import { ValidationError, outOfRange } from './errors';

/** Strict readers for untrusted JSON: unknown fields are rejected, never stripped. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/;
/** Multi-line text (commands): tab, line feed and carriage return are allowed, other controls are not. */
// eslint-disable-next-line no-control-regex
const CONTROL_MULTILINE = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f\u2028\u2029]/;

/** A character no single-line (or, with `multiline`, multi-line) text may hold. */
export function hasControlCharacter(value: string, multiline = false): boolean {
  return (multiline ? CONTROL_MULTILINE : CONTROL).test(value);
}

/**
 * Run output is kept as the task wrote it (ADR 0032): any character but NUL, which PostgreSQL text
 * cannot hold. A lone surrogate is not Unicode text (it has no UTF-8 form; the edge's JSON parser refuses it too).
 */
// eslint-disable-next-line no-control-regex
const OUTPUT_NUL = /\u0000/;
const LONE_SURROGATE = /\p{Cs}/u;

export function readObject(
  value: unknown,
  field: string,
  allowed: readonly string[],
): Record<string, unknown> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new ValidationError(field, 'must_be_object');
  }
  for (const key of Object.keys(value)) {
    if (!allowed.includes(key)) throw new ValidationError(field ? `${field}.${key}` : key, 'unknown_field');
  }
  return value as Record<string, unknown>;
}

export function readRecord(value: unknown, field: string): Record<string, unknown> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new ValidationError(field, 'must_be_object');
  }
  return value as Record<string, unknown>;
}

/**
 * A name people write (QingLong's 京东签到, emoji): any printable Unicode. Format characters — bidi
 * overrides and isolates, zero-width ones, the BOM — and private-use ones are refused: they make one
 * name look like another or reorder what a reader sees.
 */
const FORMAT_OR_PRIVATE = /[\p{Cf}\p{Co}]/u;
const SURROUNDING_SPACE = /^\s|\s$/u;
const utf8 = new TextEncoder();

export interface TextOptions {
  /** Most characters: UTF-16 code units, or with `display` code points. */
  readonly max: number;
  readonly min?: number;
  readonly pattern?: RegExp;
  readonly multiline?: boolean;
  readonly output?: boolean;
  /** A name people write: printable Unicode, normalized to NFC, no space at either end. */
  readonly display?: boolean;
  /** Most UTF-8 bytes (with `display`). */
  readonly maxBytes?: number;
}

export function readString(value: unknown, field: string, opts: TextOptions): string {
  if (typeof value !== 'string') throw new ValidationError(field, 'must_be_string');
  if (opts.display) return readDisplayText(value, field, opts);
  if (opts.output ? OUTPUT_NUL.test(value) : hasControlCharacter(value, opts.multiline))
    throw new ValidationError(field, 'control_character');
  if (opts.output && LONE_SURROGATE.test(value)) throw new ValidationError(field, 'unpaired_surrogate');
  if (value.length < (opts.min ?? 1)) throw new ValidationError(field, 'too_short');
  if (value.length > opts.max) throw new ValidationError(field, 'too_long');
  if (opts.pattern && !opts.pattern.test(value)) throw new ValidationError(field, 'invalid_format');
  return value;
}

/** A display name, NFC: the rules of `TextOptions.display`, lengths in code points and UTF-8 bytes. */
function readDisplayText(raw: string, field: string, opts: TextOptions): string {
  if (LONE_SURROGATE.test(raw)) throw new ValidationError(field, 'unpaired_surrogate');
  if (hasControlCharacter(raw)) throw new ValidationError(field, 'control_character');
  if (FORMAT_OR_PRIVATE.test(raw)) throw new ValidationError(field, 'format_character');
  const value = raw.normalize('NFC');
  const chars = [...value].length;
  if (chars < (opts.min ?? 1)) throw new ValidationError(field, 'too_short');
  if (chars > opts.max) throw new ValidationError(field, 'too_long');
  if (opts.maxBytes !== undefined && utf8.encode(value).length > opts.maxBytes)
    throw new ValidationError(field, 'too_long');
  if (SURROUNDING_SPACE.test(value)) throw new ValidationError(field, 'surrounding_space');
  if (opts.pattern && !opts.pattern.test(value)) throw new ValidationError(field, 'invalid_format');
  return value;
}

/** One of a fixed set of wire values. */
export function readEnum<T extends string>(value: unknown, field: string, values: readonly T[]): T {
  if (typeof value !== 'string' || !(values as readonly string[]).includes(value)) {
    throw new ValidationError(field, `must_be_one_of:${values.join('|')}`);
  }
  return value as T;
}

export function readBoolean(value: unknown, field: string): boolean {
  if (typeof value !== 'boolean') throw new ValidationError(field, 'must_be_boolean');
  return value;
}

export function readInt(value: unknown, field: string, min: number, max: number): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value))
    throw new ValidationError(field, 'must_be_integer');
  if (value < min || value > max) throw outOfRange(field, min, max);
  return value;
}

export function readArray(value: unknown, field: string, max: number): unknown[] {
  if (!Array.isArray(value)) throw new ValidationError(field, 'must_be_array');
  if (value.length > max) throw new ValidationError(field, 'too_many_items');
  return value;
}

/** A set of strings: duplicates are an error, the result is sorted (canonical). */
export function readStringSet(
  value: unknown,
  field: string,
  opts: { maxItems: number; max: number; pattern?: RegExp },
): string[] {
  const items = readArray(value, field, opts.maxItems).map((v, i) => readString(v, `${field}[${i}]`, opts));
  return sortedUnique(items, field);
}

export function sortedUnique(items: string[], field: string): string[] {
  const sorted = [...items].sort(compareCodeUnits);
  for (let i = 1; i < sorted.length; i++) {
    if (sorted[i] === sorted[i - 1]) throw new ValidationError(field, 'duplicate_item');
  }
  return sorted;
}

/** Locale-independent ordering by UTF-16 code units, so every process sorts the same way. */
export function compareCodeUnits(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
