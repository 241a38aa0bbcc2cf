import { utf8Length } from './canonical-json';
import { ValidationError } from './errors';
import { AuditEntry } from './ports';
import { parseSecretValue } from './secrets';
import { readArray, readObject, readString } from './strict';
import { ENV_KEY_PATTERN, TASK_LIMITS } from './tasks';

/**
 * Global environment variables, QingLong's way (issue 31 item 2, ADR 0061): a name, a value, a
 * remark, enabled, an order. A secret one's value is a secret named `env.<NAME>` (ADR 0050); a plain
 * one's follows the task `env` rule, so both can join any run's spec without a new wire field.
 */
export const ENV_VAR_LIMITS = {
  nameLength: TASK_LIMITS.envKeyLength,
  /** A plain value: the task `env` rule (UTF-16 code units, as `readEnv` counts). */
  plainValueLength: TASK_LIMITS.envValueBytes,
  remarkLength: 200,
  remarkBytes: 600,
  /** Variables that exist at all. */
  total: 500,
  /** Enabled plain variables (each run's `env` holds them with the task's own). */
  enabledPlain: 32,
  /** UTF-8 bytes of the enabled plain variables' names and values together. */
  enabledPlainBytes: 16 * 1024,
  /** Enabled secret variables (each run's `secretEnv` maps them). */
  enabledSecret: 16,
} as const;

export const ENV_VAR_NAME_PATTERN = ENV_KEY_PATTERN;
/** Secrets named so belong to a variable (ADR 0061); the secrets API refuses to write them. */
export const ENV_VAR_SECRET_PREFIX = 'env.';
/**
 * A secret variable's parts (its value split at `&` and line feeds, QingLong's multi-value form) are
 * redacted from stored output from this length on; a shorter part would hide common text.
 */
export const ENV_VAR_PART_MIN_REDACTED = 8;

export const ENV_VAR_REMARK_RULES = {
  max: ENV_VAR_LIMITS.remarkLength,
  maxBytes: ENV_VAR_LIMITS.remarkBytes,
  min: 0,
  display: true,
} as const;

export function envVarSecretName(name: string): string {
  return `${ENV_VAR_SECRET_PREFIX}${name}`;
}

export function parseEnvVarName(value: unknown, field = 'name'): string {
  return readString(value, field, { max: ENV_VAR_LIMITS.nameLength, pattern: ENV_VAR_NAME_PATTERN });
}

/** A plain value: the task `env` rule — no control character or line break, may be empty. */
export function parsePlainEnvValue(value: unknown, field = 'value'): string {
  const text = readString(value, field, { max: ENV_VAR_LIMITS.plainValueLength, min: 0 });
  if (utf8Length(text) > ENV_VAR_LIMITS.plainValueLength) throw new ValidationError(field, 'too_long');
  return text;
}

export function parseEnvVarRemark(value: unknown, field = 'remark'): string {
  if (value === '') return '';
  return readString(value, field, ENV_VAR_REMARK_RULES);
}

function readBool(value: unknown, field: string): boolean {
  if (typeof value !== 'boolean') throw new ValidationError(field, 'must_be_boolean');
  return value;
}

export interface NewEnvVar {
  readonly name: string;
  readonly value: string;
  readonly secret: boolean;
  readonly remark: string;
  readonly enabled: boolean;
}

/** `POST /api/v1/env-vars`: a secret's value by the secret rule, a plain one's by the `env` rule. */
export function parseNewEnvVar(body: unknown): NewEnvVar {
  const raw = readObject(body, '', ['name', 'value', 'secret', 'remark', 'enabled']);
  const secret = raw.secret === undefined ? false : readBool(raw.secret, 'secret');
  return {
    name: parseEnvVarName(raw.name),
    value: secret ? parseSecretValue(raw.value) : parsePlainEnvValue(raw.value),
    secret,
    remark: raw.remark === undefined ? '' : parseEnvVarRemark(raw.remark),
    enabled: raw.enabled === undefined ? true : readBool(raw.enabled, 'enabled'),
  };
}

export interface EnvVarChange {
  /** Checked against the variable's kind by `parseEnvVarValue` once it is known. */
  readonly value?: unknown;
  readonly remark?: string;
  readonly enabled?: boolean;
}

/** `PATCH /api/v1/env-vars/{name}`: at least one field; `secret` cannot change (delete and create). */
export function parseEnvVarChange(body: unknown): EnvVarChange {
  const raw = readObject(body, '', ['value', 'remark', 'enabled', 'secret']);
  if (raw.secret !== undefined) throw new ValidationError('secret', 'immutable');
  if (raw.value === undefined && raw.remark === undefined && raw.enabled === undefined)
    throw new ValidationError('body', 'empty_change', 'body: empty_change: give value, remark or enabled');
  if (raw.value !== undefined && typeof raw.value !== 'string')
    throw new ValidationError('value', 'must_be_string');
  return {
    ...(raw.value !== undefined ? { value: raw.value } : {}),
    ...(raw.remark !== undefined ? { remark: parseEnvVarRemark(raw.remark) } : {}),
    ...(raw.enabled !== undefined ? { enabled: readBool(raw.enabled, 'enabled') } : {}),
  };
}

export function parseEnvVarValue(value: unknown, secret: boolean): string {
  return secret ? parseSecretValue(value) : parsePlainEnvValue(value);
}

/** A variable as admins see it: a secret one's value never. */
export interface EnvVarRecord {
  readonly id: string;
  readonly name: string;
  readonly secret: boolean;
  /** Null for a secret variable. */
  readonly value: string | null;
  readonly remark: string;
  readonly enabled: boolean;
  readonly position: number;
  readonly version: number;
  readonly createdAt: number;
  readonly updatedAt: number;
}

/** A global variable as a run received it (ADR 0061): its name and version, never its value. */
export interface RunEnvVar {
  readonly name: string;
  readonly version: number;
  readonly secret: boolean;
}

/** What an import does (or, without `apply`, would do), by variable name. */
export interface EnvImportPlan {
  readonly applied: boolean;
  readonly create: string[];
  readonly update: string[];
  readonly unchanged: string[];
  readonly refused: { readonly at: string; readonly reason: string }[];
}

export interface EnvVarRepository {
  create(input: NewEnvVar, audit: AuditEntry): Promise<EnvVarRecord>;
  update(name: string, change: EnvVarChange, audit: AuditEntry): Promise<EnvVarRecord>;
  delete(name: string, audit: AuditEntry): Promise<EnvVarRecord>;
  /** `names` is every variable's name once, in the new order. */
  reorder(names: readonly string[], audit: AuditEntry): Promise<EnvVarRecord[]>;
  find(name: string): Promise<EnvVarRecord | null>;
  /**
   * Plans the import of `entries` and, with `apply`, makes it in one transaction with one audit row
   * (none when nothing changes). A name held by a variable of the other kind is refused, not changed.
   */
  import(entries: readonly NewEnvVar[], apply: boolean, audit: AuditEntry): Promise<EnvImportPlan>;
  /** By position then name; `after` is the name of the last one of the previous page. */
  list(query: { after?: string; limit: number }): Promise<EnvVarRecord[]>;
}

export const ENV_VAR_REPOSITORY = Symbol('EnvVarRepository');

/** `PUT /api/v1/env-vars/order`: every variable's name once, in the new order. */
export function parseEnvVarOrder(body: unknown): string[] {
  const raw = readObject(body, '', ['names']);
  const names = readArray(raw.names, 'names', ENV_VAR_LIMITS.total).map((n, i) =>
    parseEnvVarName(n, `names[${i}]`),
  );
  if (new Set(names).size !== names.length) throw new ValidationError('names', 'duplicate_item');
  return names;
}
