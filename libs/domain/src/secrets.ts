import { utf8Length } from './canonical-json';
import { ValidationError } from './errors';
import { compareCodeUnits, readRecord, readString } from './strict';

/**
 * Secrets (issue 19 items 5–8, ADR 0050): named values an admin stores, encrypted at rest, that a
 * task revision maps to env names. The value never leaves the control plane but to the worker that
 * holds a live lease of an attempt whose revision maps it; never in an admin answer, audit row or log.
 */
export const SECRET_LIMITS = {
  nameLength: 128,
  /** UTF-8 bytes of one value. */
  valueBytes: 64 * 1024,
  /** Env names one revision maps to secrets. */
  mappedEnvEntries: 32,
  /** Secrets one env name joins. */
  secretsPerEnv: 16,
  /** UTF-8 bytes of every mapped env value together, as delivered (inside one 128 KiB answer). */
  deliveredBytes: 96 * 1024,
} as const;

/** A secret name: letters, digits, `.`, `_`, `-`; never `&` or a line break (they join several names). */
export const SECRET_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;

/** How a mapping joins several secrets: QingLong's `&` or a line feed (ADR 0050, item 8). */
export const SECRET_SEPARATORS = ['&', '\n'] as const;

export function parseSecretName(value: unknown, field = 'name'): string {
  return readString(value, field, { max: SECRET_LIMITS.nameLength, pattern: SECRET_NAME_PATTERN });
}

/**
 * A value: any text but NUL (an environment variable cannot hold one), at most 64 KiB of UTF-8, not
 * empty. Line breaks and `&` are kept as given (a QingLong cookie list may be one secret).
 */
export function parseSecretValue(value: unknown, field = 'value'): string {
  const text = readString(value, field, { max: SECRET_LIMITS.valueBytes, min: 1, output: true });
  if (utf8Length(text) > SECRET_LIMITS.valueBytes) throw new ValidationError(field, 'too_long');
  return text;
}

/**
 * A revision's `secretEnv`: env name → one secret name, or several joined by one separator, `&` or a
 * line feed (`"jd-cookie-1&jd-cookie-2"`): the child then sees their values joined by that same
 * separator, as QingLong's `JD_COOKIE` holds several cookies.
 */
export function parseSecretEnv(value: unknown, envKeyPattern: RegExp, envKeyLength: number) {
  const raw = readRecord(value, 'secretEnv');
  const keys = Object.keys(raw).sort(compareCodeUnits);
  if (keys.length > SECRET_LIMITS.mappedEnvEntries) throw new ValidationError('secretEnv', 'too_many_items');
  const out: Record<string, string> = {};
  for (const key of keys) {
    readString(key, 'secretEnv.<key>', { max: envKeyLength, pattern: envKeyPattern });
    const field = `secretEnv.${key}`;
    const mapping = readString(raw[key], field, {
      max: 16 * (SECRET_LIMITS.nameLength + 1),
      multiline: true,
    });
    secretNamesOfMapping(mapping, field);
    out[key] = mapping;
  }
  return out;
}

/** The separator of a mapping (`&` when it names one secret) and the names it joins, in order. */
export function secretNamesOfMapping(
  mapping: string,
  field = 'secretEnv',
): { names: string[]; separator: string } {
  const present = SECRET_SEPARATORS.filter((s) => mapping.includes(s));
  if (present.length > 1) throw new ValidationError(field, 'mixed_separators');
  const separator = present[0] ?? '&';
  const names = mapping.split(separator);
  if (names.length > SECRET_LIMITS.secretsPerEnv) throw new ValidationError(field, 'too_many_items');
  names.forEach((name) => parseSecretName(name, field));
  return { names, separator };
}

/** Every secret name a mapping set uses, sorted, once each. */
export function secretNamesOf(secretEnv: Readonly<Record<string, string>> | undefined): string[] {
  const names = new Set<string>();
  for (const mapping of Object.values(secretEnv ?? {}))
    for (const name of secretNamesOfMapping(mapping).names) names.add(name);
  return [...names].sort(compareCodeUnits);
}

/** The env a mapping set makes of the values (`values` holds every name it uses). */
export function joinSecretEnv(
  secretEnv: Readonly<Record<string, string>>,
  values: ReadonlyMap<string, string>,
): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [key, mapping] of Object.entries(secretEnv)) {
    const { names, separator } = secretNamesOfMapping(mapping);
    env[key] = names.map((name) => values.get(name)!).join(separator);
  }
  return env;
}

/** A secret as admins see it: never its value. */
export interface SecretRecord {
  readonly name: string;
  readonly keyId: string;
  readonly createdAt: number;
  readonly updatedAt: number;
  /** Live tasks whose current revision maps it. */
  readonly usedBy: readonly string[];
}

/** What a rotation did: values moved to the current key, and how many were on it already. */
export interface SecretRotation {
  readonly reencrypted: number;
  readonly current: number;
}

export type SecretPutMode = 'create' | 'replace' | 'upsert';
