import { LeaseFenceCommand, StepPayload } from '@ql/domain';
import { LEASE_COLUMNS, LeaseRow, leaseParams } from './lease-fence';
import { RUN_COLUMNS, RunRow } from './run-sql';
import { isRetryable } from './postgres/postgres-database';
import { SqlExecutor } from './sql-executor';

/** The columns of `row`'s composite `field`, each selected under `prefix` (`(s.run).id AS r_id`). */
function composite(field: string, prefix: string, columns: string): string {
  return columns
    .split(',')
    .map((c) => c.trim())
    .map((c) => `(s.${field}).${c} AS ${prefix}${c}`)
    .join(', ');
}

/** The columns under `prefix` of a flat row, without it. */
function part<T>(row: Record<string, unknown>, prefix: string): T {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(row)) if (key.startsWith(prefix)) out[key.slice(prefix.length)] = value;
  return out as T;
}

const statements = new Map<string, string>();

/**
 * ADR 0017: a step applied by `ql_lease_step` (migration LeaseSteps) in one round trip and one commit,
 * or `null` when it was not applied there (refusal, replay, late callback, or rolled back by a deadlock):
 * nothing was written then, and the caller answers on its explaining path.
 */
export async function applyLeaseStep<A>(
  db: SqlExecutor,
  command: LeaseFenceCommand,
  payload: StepPayload,
  digest: string,
  attemptColumns: string,
): Promise<{ lease: LeaseRow; run: RunRow; attempt: A } | null> {
  let sql = statements.get(attemptColumns);
  if (!sql) {
    sql = `SELECT ${composite('lease', 'l_', LEASE_COLUMNS)}, ${composite('run', 'r_', RUN_COLUMNS)},
        ${composite('attempt', 'a_', attemptColumns)}
      FROM ql_lease_step(:step, :offerId, :workerId, :sessionId, :generation, :expectedVersion, :digest,
        :leaseGeneration, :leaseVersion, :ack, :executorHandle, :errorCode, :outcome, :exitCode,
        :errorSummary, {pinnedNow}) s`;
    statements.set(attemptColumns, sql);
  }
  const row = await db.one<Record<string, unknown>>(sql, {
    ...leaseParams(command),
    step: payload.step,
    ack: digest,
    executorHandle: payload.step === 'running' ? payload.executorHandle : null,
    errorCode: payload.step === 'start_failure' ? payload.errorCode : null,
    outcome: payload.step === 'completion' ? payload.outcome : null,
    exitCode: payload.step === 'completion' ? payload.exitCode : null,
    errorSummary: payload.step === 'completion' ? payload.errorSummary : null,
  }).catch((error: unknown) => {
    // A deadlock or serialization failure rolled the statement back: the transaction retries it.
    if (isRetryable(error)) return undefined;
    throw error;
  });
  if (!row) return null;
  return { lease: part<LeaseRow>(row, 'l_'), run: part<RunRow>(row, 'r_'), attempt: part<A>(row, 'a_') };
}
