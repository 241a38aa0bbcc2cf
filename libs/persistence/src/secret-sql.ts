import { ConflictError, SealedSecret, TaskSpec, ValidationError, secretNamesOf } from '@ql/domain';
import { nameList } from './secret-delivery';
import { SqlExecutor, SqlParams } from './sql-executor';

/** Secret rows written inside other repositories' transactions too: a task write, an env var's. */

/**
 * In a task write's transaction: every name the spec maps must exist (row-locked on PostgreSQL, so a
 * delete waits for this commit and then sees the use), and the task's uses become exactly those.
 */
export async function syncTaskSecretUses(
  tx: SqlExecutor,
  taskId: string,
  spec: Pick<TaskSpec, 'secretEnv'> | null,
): Promise<void> {
  const names = spec ? secretNamesOf(spec.secretEnv) : [];
  if (names.length > 0) {
    const list = nameList(names);
    const found = await tx.many<{ name: string }>(
      `SELECT name FROM secrets WHERE name IN (${list.sql}) ORDER BY name {forUpdate}`,
      list.params,
    );
    const unknown = names.find((n) => !found.some((f) => f.name === n));
    if (unknown !== undefined)
      throw new ValidationError(
        'secretEnv',
        'unknown_secret',
        `secretEnv: unknown_secret: no secret is named ${unknown}`,
      );
  }
  await tx.run('DELETE FROM task_secret_uses WHERE task_id = :taskId', { taskId });
  for (const name of names)
    await tx.run('INSERT INTO task_secret_uses (task_id, secret_name) VALUES (:taskId, :name)', {
      taskId,
      name,
    });
}

/** Writes a sealed value under `name`: an UPDATE when the row `exists`, else an INSERT. */
export async function writeSealed(
  tx: SqlExecutor,
  name: string,
  sealed: SealedSecret,
  exists: boolean,
): Promise<void> {
  const params = { name, keyId: sealed.keyId, nonce: sealed.nonce, ciphertext: sealed.ciphertext };
  if (exists)
    await tx.run(
      `UPDATE secrets SET key_id = :keyId, nonce = :nonce, ciphertext = :ciphertext, updated_at = {now}
       WHERE name = :name`,
      params,
    );
  else
    await tx.run(
      `INSERT INTO secrets (name, key_id, nonce, ciphertext, created_at, updated_at)
       VALUES (:name, :keyId, :nonce, :ciphertext, {now}, {now})`,
      params,
    );
}

/** Deletes secret `name`; refused (conflict `secret_in_use`) while a live task's current revision maps it. */
export async function deleteUnmapped(tx: SqlExecutor, name: string): Promise<void> {
  // The row lock a task write takes on the names it maps (lockMapped) is waited for here; after
  // it, that task's use is visible to the read below (READ COMMITTED reads each statement afresh).
  await tx.run('DELETE FROM secrets WHERE name = :name', { name });
  const users = await usersOf(tx, name);
  if (users.length > 0)
    throw new ConflictError(
      'secret_in_use',
      `secret ${name} is mapped by the current revision of task(s) ${users.join(', ')}`,
    );
}

export async function usersOf(on: SqlExecutor, name: string): Promise<string[]> {
  const rows = await on.many<{ task_id: string }>(
    'SELECT task_id FROM task_secret_uses WHERE secret_name = :name ORDER BY task_id LIMIT 100',
    { name } satisfies SqlParams,
  );
  return rows.map((r) => String(r.task_id));
}
