import { TaskBundle, parseTaskBundle } from './bundles';
import { canonicalJson, sha256Hex, utf8Length } from './canonical-json';
import { parseCron } from './cron';
import { DEFAULT_CRON_TIMEZONE, parseTimezone } from './cron-zone';
import { ValidationError } from './errors';
import { PlacementSpec, parsePlacementSpec } from './placement';
import { parseSecretEnv } from './secrets';
import { compareCodeUnits, readEnum, readInt, readObject, readRecord, readString } from './strict';

export const TASK_RUNTIMES = ['shell', 'node', 'python'] as const;
export type TaskRuntime = (typeof TASK_RUNTIMES)[number];
export const TASK_EXECUTORS = ['local-process'] as const;
export type TaskExecutor = (typeof TASK_EXECUTORS)[number];

/** Limits that keep a pinned revision inside one 128 KiB offer (R-LSE-2). */
export const TASK_LIMITS = {
  /** A task name: characters (code points) and UTF-8 bytes (128 of CJK's 3-byte characters fit). */
  nameLength: 128,
  nameBytes: 384,
  commandBytes: 32 * 1024,
  envEntries: 64,
  envKeyLength: 128,
  envValueBytes: 4 * 1024,
  envBytes: 32 * 1024,
  specBytes: 96 * 1024,
  minTimeoutMs: 1_000,
  maxTimeoutMs: 7 * 24 * 3_600_000,
  defaultTimeoutMs: 3_600_000,
  minAttempts: 2,
  maxAttempts: 20,
  maxMultiplier: 10,
  minBackoffMs: 1_000,
  maxBackoffMs: 24 * 3_600_000,
  maxPriority: 1_000,
} as const;

/** A task name is a display name (`readString`'s `display`): 京东签到, `jd_bean_change 🫘`, `Daily sign-in`. */
export const TASK_NAME_RULES = {
  max: TASK_LIMITS.nameLength,
  maxBytes: TASK_LIMITS.nameBytes,
  display: true,
} as const;
export const ENV_KEY_PATTERN = /^[A-Za-z_][A-Za-z0-9_]*$/;

export interface RetryPolicy {
  /** Attempts in all, the first included (2..20). */
  readonly maxAttempts: number;
  readonly initialBackoffMs: number;
  /** 1..10: backoff of attempt n is initial × multiplier^(n-1), capped at maxBackoffMs. */
  readonly multiplier: number;
  readonly maxBackoffMs: number;
}

/**
 * One immutable execution revision of a task (R-RUN-1), in canonical form. Its digest is the SHA-256
 * of its canonical JSON; a run pins (task, revision, digest).
 */
export interface TaskSpec {
  readonly name: string;
  readonly command: string;
  readonly runtime: TaskRuntime;
  readonly executor: TaskExecutor;
  readonly placement: PlacementSpec;
  readonly timeoutMs: number;
  readonly retry: RetryPolicy | null;
  readonly env: Readonly<Record<string, string>>;
  /**
   * Env names the child gets from secrets (ADR 0050): the secret's name, or several joined by `&` or a
   * line feed. Absent when empty, so specs written before secrets keep their digests. The values are
   * fetched by the lease holder after `starting`; the spec (and so the offer) holds only names.
   */
  readonly secretEnv?: Readonly<Record<string, string>>;
  readonly cron: string | null;
  /**
   * The IANA zone the cron expression's wall-clock times are in; absent means UTC (and a UTC zone is
   * left out, so specs written before zones existed keep their digests). Only with a cron.
   */
  readonly timezone?: string;
  readonly priority: number;
  /**
   * The script bundle the command runs in (issue 19, ADR 0051): its digest and a folder inside it.
   * Absent without one, so specs written before bundles existed keep their digests.
   */
  readonly bundle?: TaskBundle;
}

/**
 * Spec fields a worker needs wire v2 to receive (ADR 0056): each changes what runs (secrets, the
 * script files), so a v1 offer cannot leave it out.
 */
export const V2_RUN_SPEC_FIELDS = ['secretEnv', 'bundle'] as const;

/** The lowest wire version a session must speak to be offered a run of `spec` (ADR 0062). */
export function runWireVersion(spec: TaskSpec, secretEnvVars = false): number {
  return secretEnvVars || V2_RUN_SPEC_FIELDS.some((field) => spec[field] !== undefined) ? 2 : 1;
}

export interface CanonicalTaskSpec {
  readonly spec: TaskSpec;
  readonly canonical: string;
  readonly digest: string;
}

const FIELDS = [
  'name',
  'command',
  'runtime',
  'executor',
  'placement',
  'timeoutMs',
  'retry',
  'env',
  'secretEnv',
  'cron',
  'timezone',
  'priority',
  'bundle',
] as const;

/** Strictly parses a task body (create or update) into its canonical revision spec. */
export function parseTaskSpec(input: unknown): CanonicalTaskSpec {
  const raw = readObject(input, '', FIELDS);
  const command = readString(raw.command, 'command', {
    max: TASK_LIMITS.commandBytes,
    min: 1,
    multiline: true,
  });
  if (utf8Length(command) > TASK_LIMITS.commandBytes) throw new ValidationError('command', 'too_long');
  const timezone =
    raw.timezone === undefined || raw.timezone === null ? DEFAULT_CRON_TIMEZONE : parseTimezone(raw.timezone);
  const cron =
    raw.cron === undefined || raw.cron === null ? null : parseCron(raw.cron, 'cron', timezone).expression;
  if (cron === null && timezone !== DEFAULT_CRON_TIMEZONE)
    throw new ValidationError(
      'timezone',
      'requires_cron',
      'timezone: requires_cron: a time zone applies to a cron only',
    );
  const secretEnv =
    raw.secretEnv === undefined || raw.secretEnv === null
      ? {}
      : parseSecretEnv(raw.secretEnv, ENV_KEY_PATTERN, TASK_LIMITS.envKeyLength);
  const env = readEnv(raw.env ?? {});
  const both = Object.keys(secretEnv).find((key) => key in env);
  if (both !== undefined) throw new ValidationError(`secretEnv.${both}`, 'also_in_env');
  const spec: TaskSpec = {
    name: readString(raw.name, 'name', TASK_NAME_RULES),
    command,
    runtime: readEnum(raw.runtime, 'runtime', TASK_RUNTIMES),
    executor:
      raw.executor === undefined ? 'local-process' : readEnum(raw.executor, 'executor', TASK_EXECUTORS),
    placement: parsePlacementSpec(raw.placement),
    timeoutMs:
      raw.timeoutMs === undefined
        ? TASK_LIMITS.defaultTimeoutMs
        : readInt(raw.timeoutMs, 'timeoutMs', TASK_LIMITS.minTimeoutMs, TASK_LIMITS.maxTimeoutMs),
    retry: raw.retry === undefined || raw.retry === null ? null : readRetry(raw.retry),
    env,
    ...(Object.keys(secretEnv).length === 0 ? {} : { secretEnv }),
    cron,
    ...(timezone === DEFAULT_CRON_TIMEZONE ? {} : { timezone }),
    priority: raw.priority === undefined ? 0 : readInt(raw.priority, 'priority', 0, TASK_LIMITS.maxPriority),
    ...(raw.bundle === undefined || raw.bundle === null ? {} : { bundle: parseTaskBundle(raw.bundle) }),
  };
  const canonical = canonicalJson(spec);
  if (utf8Length(canonical) > TASK_LIMITS.specBytes) throw new ValidationError('', 'too_large');
  return { spec, canonical, digest: sha256Hex(canonical) };
}

function readRetry(value: unknown): RetryPolicy {
  const r = readObject(value, 'retry', ['maxAttempts', 'initialBackoffMs', 'multiplier', 'maxBackoffMs']);
  const initialBackoffMs = readInt(
    r.initialBackoffMs,
    'retry.initialBackoffMs',
    TASK_LIMITS.minBackoffMs,
    TASK_LIMITS.maxBackoffMs,
  );
  const maxBackoffMs =
    r.maxBackoffMs === undefined
      ? Math.max(initialBackoffMs, 600_000)
      : readInt(r.maxBackoffMs, 'retry.maxBackoffMs', initialBackoffMs, TASK_LIMITS.maxBackoffMs);
  return {
    maxAttempts: readInt(
      r.maxAttempts,
      'retry.maxAttempts',
      TASK_LIMITS.minAttempts,
      TASK_LIMITS.maxAttempts,
    ),
    initialBackoffMs,
    multiplier:
      r.multiplier === undefined
        ? 2
        : readInt(r.multiplier, 'retry.multiplier', 1, TASK_LIMITS.maxMultiplier),
    maxBackoffMs,
  };
}

function readEnv(value: unknown): Record<string, string> {
  const raw = readRecord(value, 'env');
  const keys = Object.keys(raw).sort(compareCodeUnits);
  if (keys.length > TASK_LIMITS.envEntries) throw new ValidationError('env', 'too_many_items');
  const env: Record<string, string> = {};
  let bytes = 0;
  for (const key of keys) {
    readString(key, 'env.<key>', { max: TASK_LIMITS.envKeyLength, pattern: ENV_KEY_PATTERN });
    const v = readString(raw[key], `env.${key}`, { max: TASK_LIMITS.envValueBytes, min: 0 });
    bytes += utf8Length(key) + utf8Length(v);
    env[key] = v;
  }
  if (bytes > TASK_LIMITS.envBytes) throw new ValidationError('env', 'too_large');
  return env;
}

/** Backoff before attempt `nextAttemptNo` (2, 3, …) under `policy` (R-RUN-4). */
export function retryBackoffMs(policy: RetryPolicy, nextAttemptNo: number): number {
  const exponent = Math.max(0, nextAttemptNo - 2);
  return Math.min(policy.maxBackoffMs, policy.initialBackoffMs * policy.multiplier ** exponent);
}

/** A stored task as repositories return it. */
export interface TaskRecord {
  readonly id: string;
  readonly name: string;
  readonly revision: number;
  readonly digest: string;
  readonly spec: TaskSpec;
  /** A disabled task keeps its schedule; cron skips it (issue 31 item 3). Not part of a revision. */
  readonly enabled: boolean;
  /** Listed first (QingLong's 置顶). Not part of a revision. */
  readonly pinned: boolean;
  readonly createdAt: number;
  readonly updatedAt: number;
}

/** Text folded for search: NFKC and lower case, the same rule in JS for both dialects. */
export function searchFold(text: string): string {
  return text.normalize('NFKC').toLowerCase();
}

/** What a task is found by: its name and its command, folded. */
export function taskSearchText(spec: Pick<TaskSpec, 'name' | 'command'>): string {
  return searchFold(`${spec.name}\n${spec.command}`);
}

export interface TaskRevisionRecord {
  readonly taskId: string;
  readonly revision: number;
  readonly digest: string;
  readonly spec: TaskSpec;
  /** UTF-8 bytes of the stored canonical spec: bounds the offer without serialising it again. */
  readonly specBytes: number;
  readonly createdAt: number;
}
