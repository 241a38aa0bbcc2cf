import {
  AuditEntry,
  BundleRecord,
  BundleRepository,
  ConflictError,
  FencedError,
  IdGenerator,
  LeaseFenceCommand,
  NewBundle,
  NotFoundError,
} from '@ql/domain';
import { appendAudit } from './audit-sql';
import { leaseViolation, readFencedLease } from './lease-fence';
import { SqlDatabase, SqlExecutor, toInt, toMs } from './sql-executor';

interface BundleRow {
  digest: string;
  size_bytes: number | string;
  files: number;
  unpacked_bytes: number | string;
  created_by: string;
  created_at: number | Date;
}

const COLUMNS = 'digest, size_bytes, files, unpacked_bytes, created_by, created_at';

/** Run statuses that may still launch an attempt of their pinned revision. */
const UNFINISHED = `('queued', 'dispatching', 'running', 'retry_wait')`;

/**
 * Bundles on either dialect (ADR 0051): the bytes in a BLOB / bytea row keyed by their SHA-256. A
 * put and a delete lock the bundle's row, and so does a task write that pins it, so "pinned" is
 * decided under one lock order: bundle row, then the task rows.
 */
export class SqlBundleRepository implements BundleRepository {
  constructor(
    private readonly db: SqlDatabase,
    private readonly ids: IdGenerator,
  ) {}

  async put(bundle: NewBundle, audit: AuditEntry) {
    return this.db.transaction(async (tx) => {
      const existing = await tx.one<BundleRow>(
        `SELECT ${COLUMNS} FROM bundles WHERE digest = :digest {forUpdate}`,
        { digest: bundle.digest },
      );
      if (existing) return { bundle: toBundle(existing), created: false };
      const row = await tx.one<BundleRow>(
        `INSERT INTO bundles (digest, size_bytes, files, unpacked_bytes, content, created_by, created_at)
         VALUES (:digest, :size, :files, :unpacked, :content, :createdBy, {now})
         ON CONFLICT (digest) DO NOTHING RETURNING ${COLUMNS}`,
        {
          digest: bundle.digest,
          size: bundle.content.length,
          files: bundle.files,
          unpacked: bundle.unpackedBytes,
          content: bundle.content,
          createdBy: bundle.createdBy,
        },
      );
      if (!row) {
        // A concurrent put of the same bytes committed first: the same bundle, nothing more to write.
        const winner = await tx.one<BundleRow>(`SELECT ${COLUMNS} FROM bundles WHERE digest = :digest`, {
          digest: bundle.digest,
        });
        return { bundle: toBundle(winner!), created: false };
      }
      await appendAudit(tx, this.ids, audit);
      return { bundle: toBundle(row), created: true };
    });
  }

  async find(digest: string): Promise<BundleRecord | null> {
    const row = await this.db.one<BundleRow>(`SELECT ${COLUMNS} FROM bundles WHERE digest = :digest`, {
      digest,
    });
    return row ? toBundle(row) : null;
  }

  async list(query: { after?: string; limit: number }): Promise<BundleRecord[]> {
    const rows = await this.db.many<BundleRow>(
      `SELECT ${COLUMNS} FROM bundles ${query.after ? 'WHERE digest > :after' : ''} ORDER BY digest LIMIT :limit`,
      { limit: query.limit, ...(query.after ? { after: query.after } : {}) },
    );
    return rows.map(toBundle);
  }

  async delete(digest: string, audit: AuditEntry): Promise<BundleRecord> {
    return this.db.transaction(async (tx) => {
      const row = await tx.one<BundleRow>(
        `SELECT ${COLUMNS} FROM bundles WHERE digest = :digest {forUpdate}`,
        {
          digest,
        },
      );
      if (!row) throw new NotFoundError('bundle');
      if (await pinned(tx, digest))
        throw new ConflictError(
          'bundle_pinned',
          'a live task or an unfinished run pins this bundle: change or delete the task first, and let its runs finish',
        );
      await tx.run('DELETE FROM bundles WHERE digest = :digest', { digest });
      await appendAudit(tx, this.ids, audit);
      return toBundle(row);
    });
  }

  async readChunk(digest: string, offset: number, length: number): Promise<Buffer | null> {
    // SQLite's substr and PostgreSQL's substring both count bytes of a BLOB / bytea from 1.
    const sql =
      this.db.dialect === 'postgres'
        ? 'SELECT substring(content FROM :start FOR :length) AS part FROM bundles WHERE digest = :digest'
        : 'SELECT substr(content, :start, :length) AS part FROM bundles WHERE digest = :digest';
    const row = await this.db.one<{ part: Buffer | Uint8Array | null }>(sql, {
      digest,
      start: offset + 1,
      length,
    });
    if (!row) return null;
    return row.part === null ? Buffer.alloc(0) : Buffer.from(row.part);
  }

  /**
   * The worker's fetch (ADR 0051): the session and lease fences of every lease call, then the lease's
   * attempt must pin `digest` through its run's revision, and be `starting` (issue 27 item 7: the
   * worker fetches between its `starting` report and the launch, so every download follows an
   * `attempt.starting` event of its run). Refusals: FencedError (409; `attempt_not_starting` for a
   * claimed or running attempt), NotFoundError (404: not pinned, or no such bundle; which is not told).
   */
  async authorizeFetch(command: LeaseFenceCommand, digest: string): Promise<BundleRecord> {
    const { lease, now } = await readFencedLease(this.db, command, '');
    const violation = leaseViolation(lease, command, now);
    if (violation) throw new FencedError('lease', violation);
    const row = await this.db.one<BundleRow & { attempt_status: string }>(
      `SELECT ${COLUMNS.split(', ')
        .map((c) => `b.${c}`)
        .join(', ')}, a.status AS attempt_status FROM attempts a
       JOIN runs r ON r.id = a.run_id
       JOIN task_revisions v ON v.task_id = r.task_id AND v.revision = r.revision
       JOIN bundles b ON b.digest = v.bundle_digest
       WHERE a.id = :attemptId AND v.bundle_digest = :digest`,
      { attemptId: lease!.attemptId, digest },
    );
    if (!row) throw new NotFoundError('bundle', "no bundle of this digest is pinned by the lease's attempt");
    if (row.attempt_status !== 'starting') throw new FencedError('lease', 'attempt_not_starting');
    return toBundle(row);
  }
}

/** Pinned: a live task's current revision names it, or an unfinished run's revision does. */
async function pinned(tx: SqlExecutor, digest: string): Promise<boolean> {
  const task = await tx.one<{ id: string }>(
    `SELECT id FROM tasks WHERE bundle_digest = :digest AND deleted_at IS NULL LIMIT 1`,
    { digest },
  );
  if (task) return true;
  const run = await tx.one<{ id: string }>(
    `SELECT r.id FROM task_revisions v JOIN runs r ON r.task_id = v.task_id AND r.revision = v.revision
     WHERE v.bundle_digest = :digest AND r.status IN ${UNFINISHED} LIMIT 1`,
    { digest },
  );
  return run !== undefined;
}

function toBundle(row: BundleRow): BundleRecord {
  return {
    digest: row.digest,
    sizeBytes: toInt(row.size_bytes),
    files: toInt(row.files),
    unpackedBytes: toInt(row.unpacked_bytes),
    createdBy: row.created_by,
    createdAt: toMs(row.created_at),
  };
}
