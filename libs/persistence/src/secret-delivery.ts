import {
  ENV_VAR_PART_MIN_REDACTED,
  ENV_VAR_SECRET_PREFIX,
  FencedError,
  IdGenerator,
  IllegalStateError,
  LeaseFenceCommand,
  SECRET_LIMITS,
  SecretDelivery,
  UnavailableError,
  joinSecretEnv,
  redactionValues,
  secretNamesOf,
  utf8Length,
} from '@ql/domain';
import { appendAudit } from './audit-sql';
import { leaseViolation, readFencedLease } from './lease-fence';
import { SealedSecret, SecretCipher } from '@ql/domain';
import { SqlDatabase, SqlExecutor, isTrue, toInt } from './sql-executor';
import { readPinnedRevision } from './run-env-vars';

/**
 * Secrets for the holder of a live lease (ADR 0050, issue 19 item 6): the session fence, then the lease
 * (holder, token, generation, active, in term, version — the renew rule), then its attempt, which must
 * be this lease's and `starting` or `running`. Only then are the values its revision maps opened; one
 * audit row names them (never a value). Any refusal throws before a value is read.
 */
export async function deliverSecrets(
  db: SqlDatabase,
  ids: IdGenerator,
  cipher: SecretCipher | undefined,
  command: LeaseFenceCommand,
): Promise<SecretDelivery> {
  return db.transaction(async (tx) => {
    const { lease, now } = await readFencedLease(tx, command, '{forUpdate}');
    const fault = leaseViolation(lease, command, now);
    if (fault) throw new FencedError('lease', fault);
    const attempt = await tx.one<{
      status: string;
      lease_generation: number | string;
      task_id: string;
      revision: number | string;
      cancel_requested: number | boolean;
      spec_digest: string;
    }>(
      `SELECT a.status, a.lease_generation, r.task_id, r.revision, r.cancel_requested, r.spec_digest
       FROM attempts a JOIN runs r ON r.id = a.run_id WHERE a.id = :id`,
      { id: lease!.attemptId },
    );
    if (!attempt) throw new IllegalStateError(`attempt ${lease!.attemptId} of a lease is missing`);
    if (toInt(attempt.lease_generation) !== lease!.leaseGeneration)
      throw new FencedError('lease', 'lease_not_active');
    if (attempt.status !== 'starting' && attempt.status !== 'running')
      throw new FencedError('lease', 'attempt_not_starting');
    // A run cancelled before it launched will not launch: its values have nowhere to go (issue 27).
    if (isTrue(attempt.cancel_requested))
      throw new UnavailableError(
        'cancel_requested',
        'the run is being cancelled: its secrets are not delivered',
      );
    const revision = await readPinnedRevision(tx, {
      id: lease!.runId,
      taskId: attempt.task_id,
      revision: toInt(attempt.revision),
      specDigest: attempt.spec_digest,
    });
    if (!revision) throw new IllegalStateError(`attempt ${lease!.attemptId} pins a missing revision`);
    const secretEnv = revision.spec.secretEnv ?? {};
    const names = secretNamesOf(secretEnv);
    if (names.length === 0) return { attemptId: lease!.attemptId, env: {} };
    const env = joinSecretEnv(secretEnv, await openSecrets(tx, cipher, names));
    const bytes = Object.entries(env).reduce((n, [k, v]) => n + utf8Length(k) + utf8Length(v), 0);
    if (bytes > SECRET_LIMITS.deliveredBytes)
      throw new UnavailableError(
        'secrets_too_large',
        `the mapped secrets total ${bytes} bytes; at most ${SECRET_LIMITS.deliveredBytes} go to one attempt`,
      );
    await appendAudit(tx, ids, {
      actor: `worker:${command.workerId}`,
      action: 'secret.deliver',
      target: `attempt:${lease!.attemptId}`,
      detail: { runId: lease!.runId, secrets: names, env: Object.keys(env) },
    });
    return { attemptId: lease!.attemptId, env };
  });
}

/**
 * The control plane's redaction of a run's stored output (issue 19 item 7): every value the run's
 * revision maps (each secret, and each env value as joined), or none when it maps nothing. A secret
 * deleted or a key gone since: nothing to redact with, and the worker's redaction stands.
 */
export async function redactionValuesFor(
  tx: SqlExecutor,
  cipher: SecretCipher | undefined,
  run: { id: string; taskId: string; revision: number; specDigest: string },
): Promise<string[]> {
  const revision = await readPinnedRevision(tx, run);
  const secretEnv = revision?.spec.secretEnv;
  const names = secretNamesOf(secretEnv);
  if (names.length === 0 || !cipher) return [];
  const values = new Map<string, string>();
  for (const name of names) {
    const one = await openSecrets(tx, cipher, [name]).catch(() => new Map<string, string>());
    for (const [k, v] of one) values.set(k, v);
  }
  const joined = values.size === names.length ? Object.values(joinSecretEnv(secretEnv!, values)) : [];
  // A secret env var may hold QingLong's multi-value form: each account's part is a secret too
  // (ADR 0061). The worker splits only per mapped secret, so the parts are hidden here.
  const parts = [...values]
    .filter(([name]) => name.startsWith(ENV_VAR_SECRET_PREFIX))
    .flatMap(([, value]) => value.split(/&|\n/))
    .filter((part) => part.length >= ENV_VAR_PART_MIN_REDACTED);
  return redactionValues([...values.values(), ...joined, ...parts]);
}

/** `:n0, :n1, …` and their parameters, for an `IN (…)` of names. */
export function nameList(names: readonly string[]): { sql: string; params: Record<string, string> } {
  const params: Record<string, string> = {};
  names.forEach((name, i) => (params[`n${i}`] = name));
  return { sql: names.map((_n, i) => `:n${i}`).join(', '), params };
}

/** `names` opened with `cipher`; a missing name or key is an UnavailableError naming why. */
export async function openSecrets(
  on: SqlExecutor,
  cipher: SecretCipher | undefined,
  names: readonly string[],
): Promise<Map<string, string>> {
  const values = new Map<string, string>();
  if (names.length === 0) return values;
  if (!cipher) throw new UnavailableError('secrets_disabled', 'QL_SECRETS_KEY is not set');
  const list = nameList(names);
  const rows = await on.many<SecretRow>(
    `SELECT name, key_id, nonce, ciphertext, created_at, updated_at FROM secrets WHERE name IN (${list.sql})`,
    list.params,
  );
  for (const row of rows) values.set(row.name, cipher.open(row.name, sealedOf(row)));
  const missing = names.find((n) => !values.has(n));
  if (missing !== undefined) throw new UnavailableError('secret_missing', `secret ${missing} does not exist`);
  return values;
}

/** A stored secret row. */
export interface SecretRow {
  name: string;
  key_id: string;
  nonce: string;
  ciphertext: string;
  created_at: number | Date;
  updated_at: number | Date;
}

export function sealedOf(row: SecretRow): SealedSecret {
  return { keyId: row.key_id, nonce: row.nonce, ciphertext: row.ciphertext };
}
