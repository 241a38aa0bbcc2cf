import {
  ConflictError,
  IllegalStateError,
  RunEnvVar,
  TaskRevisionRecord,
  TaskSpec,
  ValidationError,
  envVarSecretName,
  parseTaskSpec,
  utf8Length,
} from '@ql/domain';
import { SqlExecutor, isTrue, toInt } from './sql-executor';
import { readRevision } from './revision-sql';

interface Pinned extends RunEnvVar {
  readonly envVarId: string;
  /** A plain one's value; null for a secret one (delivered per lease as `env.<name>`). */
  readonly value: string | null;
}

/**
 * The revision's spec with the global variables (ADR 0061): plain ones join `env`, secret ones
 * `secretEnv` as `NAME → env.NAME`; the task's own entries are never overridden (they were left out
 * when the run was pinned). Judged by the task rules, so what a worker reads is a valid spec.
 */
function merge(spec: TaskSpec, vars: readonly Pinned[]) {
  const env: Record<string, string> = { ...spec.env };
  const secretEnv: Record<string, string> = { ...(spec.secretEnv ?? {}) };
  for (const v of vars)
    if (v.value === null) secretEnv[v.name] = envVarSecretName(v.name);
    else env[v.name] = v.value;
  return parseTaskSpec({ ...spec, env, secretEnv });
}

/**
 * In a run's creating transaction: the enabled variables in order, but those the task's revision sets
 * in `env` or `secretEnv` (its own value wins), and the digest of the spec merged with them (null when
 * none applies: the run pins the revision's digest). A merged spec past the task limits is refused
 * (409 `env_vars_do_not_fit`), naming the rule.
 */
export async function pinEnvVars(
  tx: SqlExecutor,
  spec: TaskSpec,
): Promise<{ vars: Pinned[]; digest: string | null }> {
  const rows = await tx.many<{
    id: string;
    name: string;
    secret: number | boolean;
    version: number | string;
  }>('SELECT id, name, secret, version FROM env_vars WHERE enabled ORDER BY position, name');
  const own = new Set([...Object.keys(spec.env), ...Object.keys(spec.secretEnv ?? {})]);
  const chosen = rows.filter((r) => !own.has(r.name));
  if (chosen.length === 0) return { vars: [], digest: null };
  const vars = await withValues(
    tx,
    chosen.map((r) => ({
      envVarId: String(r.id),
      name: r.name,
      version: toInt(r.version),
      secret: isTrue(r.secret),
    })),
  );
  try {
    return { vars, digest: merge(spec, vars).digest };
  } catch (error) {
    if (!(error instanceof ValidationError)) throw error;
    throw new ConflictError(
      'env_vars_do_not_fit',
      `the task's spec with the enabled global env vars breaks a rule (${error.message}): disable some, or move the task's own env into them`,
    );
  }
}

/** Records what `pinEnvVars` chose for run `runId`: names and versions, in order. */
export async function recordEnvVars(tx: SqlExecutor, runId: string, vars: readonly Pinned[]): Promise<void> {
  for (const [position, v] of vars.entries())
    await tx.run(
      `INSERT INTO run_env_vars (run_id, position, env_var_id, name, version, secret)
       VALUES (:runId, :position, :envVarId, :name, :version, :secret)`,
      { runId, position, envVarId: v.envVarId, name: v.name, version: v.version, secret: v.secret },
    );
}

/** The variables run `runId` received, in order (empty before env vars or without any). */
export async function readRunEnvVars(on: SqlExecutor, runId: string): Promise<RunEnvVar[]> {
  const rows = await on.many<{ name: string; version: number | string; secret: number | boolean }>(
    'SELECT name, version, secret FROM run_env_vars WHERE run_id = :runId ORDER BY position',
    { runId },
  );
  return rows.map((r) => ({ name: r.name, version: toInt(r.version), secret: isTrue(r.secret) }));
}

/**
 * The spec a run is offered: its revision's, merged with the variables it was pinned with. A run
 * whose digest is its revision's received none, and costs no read beyond the (cached) revision.
 */
export async function readPinnedRevision(
  on: SqlExecutor,
  run: {
    readonly id: string;
    readonly taskId: string;
    readonly revision: number;
    readonly specDigest: string;
  },
): Promise<TaskRevisionRecord | null> {
  const revision = await readRevision(on, run.taskId, run.revision);
  if (!revision || revision.digest === run.specDigest) return revision;
  const rows = await on.many<{
    env_var_id: string;
    name: string;
    version: number | string;
    secret: number | boolean;
  }>('SELECT env_var_id, name, version, secret FROM run_env_vars WHERE run_id = :runId ORDER BY position', {
    runId: run.id,
  });
  const vars = await withValues(
    on,
    rows.map((r) => ({
      envVarId: String(r.env_var_id),
      name: r.name,
      version: toInt(r.version),
      secret: isTrue(r.secret),
    })),
  );
  const merged = merge(revision.spec, vars);
  if (merged.digest !== run.specDigest)
    throw new IllegalStateError(`run ${run.id}: its revision with its env vars is not its pinned spec`);
  return { ...revision, spec: merged.spec, digest: merged.digest, specBytes: utf8Length(merged.canonical) };
}

async function withValues(
  on: SqlExecutor,
  vars: readonly (RunEnvVar & { readonly envVarId: string })[],
): Promise<Pinned[]> {
  const out: Pinned[] = [];
  for (const v of vars) {
    if (v.secret) {
      out.push({ ...v, value: null });
      continue;
    }
    const row = await on.one<{ value: string }>(
      'SELECT value FROM env_var_versions WHERE env_var_id = :id AND version = :version',
      { id: v.envVarId, version: v.version },
    );
    if (!row) throw new IllegalStateError(`env var ${v.name} version ${v.version} has no stored value`);
    out.push({ ...v, value: row.value });
  }
  return out;
}
