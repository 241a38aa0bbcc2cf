import { ValidationError } from '@ql/domain';
import { SqlExecutor } from './sql-executor';

/** Inside a task write: the pinned bundle must exist; its row is locked so no delete passes between. */
export async function lockPinnedBundle(tx: SqlExecutor, digest: string): Promise<void> {
  const row = await tx.one<{ digest: string }>(
    `SELECT digest FROM bundles WHERE digest = :digest {forUpdate}`,
    {
      digest,
    },
  );
  if (!row)
    throw new ValidationError(
      'bundle.digest',
      'unknown_bundle',
      'bundle.digest: unknown_bundle (push it first)',
    );
}
