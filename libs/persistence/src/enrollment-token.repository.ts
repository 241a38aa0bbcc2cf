import { createHash, randomBytes } from 'node:crypto';
import {
  AuditEntry,
  ENROLLMENT_TOKEN_PATTERN,
  EnrollmentRefusal,
  EnrollmentRefusedError,
  EnrollmentTokenRecord,
  EnrollmentTokenRepository,
  EnrollmentTokenSpec,
  EnrollmentTokenUse,
  IdGenerator,
  NotFoundError,
  WorkerCertificateRecord,
  WorkerCertificateSigner,
  enrollmentPatternMatches,
  parseWorkerId,
} from '@ql/domain';
import { appendAudit } from './audit-sql';
import { recordIssuedCertificate } from './certificate-sql';
import { SqlDatabase, SqlExecutor, SqlTransaction, isTrue, toInt, toMs, toMsOrNull } from './sql-executor';

/** A new enrollment token: `qlet_` + 256 random bits (ADR 0045 §1). */
export function newEnrollmentToken(): string {
  return `qlet_${randomBytes(32).toString('base64url')}`;
}

/** What is stored of a token: its SHA-256, hex. */
export function enrollmentTokenDigest(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('hex');
}

interface TokenRow {
  id: string;
  worker_id: string | null;
  pattern: string | null;
  max_workers: number;
  expires_at: number | Date;
  revoked_at: number | Date | null;
  may_replace: boolean | number;
  created_by: string;
  created_at: number | Date;
}
interface ListedRow extends TokenRow {
  uses: number | string;
  expired: boolean | number;
}

const COLUMNS =
  'id, worker_id, pattern, max_workers, expires_at, revoked_at, may_replace, created_by, created_at';
/** A token with its use count and, by the database clock, whether it expired. */
const LISTED = `SELECT ${COLUMNS.replace(/(\w+)/g, 't.$1')},
    (SELECT count(*) FROM enrollment_token_uses u WHERE u.token_id = t.id) AS uses,
    (t.expires_at <= {now}) AS expired
  FROM enrollment_tokens t`;

/** Enrollment tokens by SHA-256 digest; the token itself is never stored, logged or listed. */
export class SqlEnrollmentTokenRepository implements EnrollmentTokenRepository {
  constructor(
    private readonly db: SqlDatabase,
    private readonly ids: IdGenerator,
  ) {}

  async create(
    input: { id: string; spec: EnrollmentTokenSpec; createdBy: string },
    audit: AuditEntry,
  ): Promise<{ token: string; record: EnrollmentTokenRecord }> {
    const token = newEnrollmentToken();
    const { spec } = input;
    const row = await this.db.transaction(async (tx) => {
      const inserted = await tx.one<TokenRow>(
        `INSERT INTO enrollment_tokens
           (id, digest, worker_id, pattern, max_workers, expires_at, may_replace, created_by, created_at)
         VALUES (:id, :digest, :workerId, :pattern, :maxWorkers, {now + :ttlMs}, :mayReplace, :createdBy, {now})
         RETURNING ${COLUMNS}`,
        {
          id: input.id,
          digest: enrollmentTokenDigest(token),
          workerId: spec.workerId,
          pattern: spec.pattern,
          maxWorkers: spec.maxWorkers,
          ttlMs: spec.ttlSeconds * 1000,
          mayReplace: spec.mayReplace,
          createdBy: input.createdBy,
        },
      );
      await appendAudit(tx, this.ids, audit);
      return inserted!;
    });
    // At least a minute to live and no use yet: active.
    return { token, record: toRecord({ ...row, uses: 0, expired: false }) };
  }

  async list(query: { afterId?: string; limit: number }): Promise<EnrollmentTokenRecord[]> {
    const rows = await this.db.many<ListedRow>(
      `${LISTED} ${query.afterId ? 'WHERE t.id > :after' : ''} ORDER BY t.id LIMIT :limit`,
      { limit: query.limit, ...(query.afterId ? { after: query.afterId } : {}) },
    );
    return rows.map(toRecord);
  }

  async revoke(id: string, audit: AuditEntry): Promise<EnrollmentTokenRecord> {
    return this.db.transaction(async (tx) => {
      const changed = await tx.run(
        'UPDATE enrollment_tokens SET revoked_at = COALESCE(revoked_at, {now}) WHERE id = :id',
        { id },
      );
      if (changed === 0) throw new NotFoundError('enrollment_token');
      await appendAudit(tx, this.ids, audit);
      return toRecord((await tx.one<ListedRow>(`${LISTED} WHERE t.id = :id`, { id }))!);
    });
  }

  async consume(
    workerId: string,
    token: string,
    at: number,
    sign?: WorkerCertificateSigner,
  ): Promise<EnrollmentTokenUse & { certificate?: WorkerCertificateRecord }> {
    parseWorkerId(workerId);
    type Outcome =
      | { refusal: EnrollmentRefusal; tokenId: string | null }
      | { use: EnrollmentTokenUse & { certificate?: WorkerCertificateRecord } };
    const outcome = await this.db.transaction(async (tx): Promise<Outcome> => {
      // A malformed token is not looked up; it is refused like an unknown one.
      const row = ENROLLMENT_TOKEN_PATTERN.test(token)
        ? await tx.one<TokenRow>(
            `SELECT ${COLUMNS} FROM enrollment_tokens WHERE digest = :digest {forUpdate}`,
            { digest: enrollmentTokenDigest(token) },
          )
        : undefined;
      const refusal = row
        ? ((await refusalOf(tx, row, workerId, at)) ?? (await workerRefusal(tx, row, workerId)))
        : 'enrollment_token_invalid';
      // A refusal writes nothing: its audit row is the caller's, bounded per source (issue 27 item 9).
      if (refusal) return { refusal, tokenId: row?.id ?? null };
      await tx.run(
        'INSERT INTO enrollment_token_uses (token_id, worker_id, at) VALUES (:tokenId, :workerId, {ms :at})',
        { tokenId: row!.id, workerId, at },
      );
      await appendAudit(tx, this.ids, {
        actor: `worker:${workerId}`,
        action: 'enrollment_token.use',
        target: `enrollment_token:${row!.id}`,
        detail: { workerId },
      });
      // Signed last, after every check and write: a signing failure rolls the use back.
      const certificate = sign ? await recordIssuedCertificate(tx, await sign(), null) : undefined;
      return { use: { tokenId: row!.id, workerId, at, ...(certificate ? { certificate } : {}) } };
    });
    if ('refusal' in outcome) throw new EnrollmentRefusedError(outcome.refusal, outcome.tokenId);
    return outcome.use;
  }
}

/**
 * Why `row` does not enroll `workerId` at `at`, or null. Runs under the token's row lock (PostgreSQL
 * `FOR UPDATE`; SQLite's one writer), so the count and the per-worker use cannot move until commit.
 */
async function refusalOf(
  tx: SqlExecutor,
  row: TokenRow,
  workerId: string,
  at: number,
): Promise<EnrollmentRefusal | null> {
  if (row.revoked_at !== null || toMs(row.expires_at) <= at) return 'enrollment_token_invalid';
  const named =
    row.worker_id !== null ? row.worker_id === workerId : enrollmentPatternMatches(row.pattern!, workerId);
  if (!named) return 'enrollment_token_wrong_worker';
  const uses = await tx.one<{ mine: number | null; n: number | string }>(
    `SELECT (SELECT 1 FROM enrollment_token_uses WHERE token_id = :id AND worker_id = :workerId) AS mine,
            (SELECT count(*) FROM enrollment_token_uses WHERE token_id = :id) AS n`,
    { id: row.id, workerId },
  );
  if (uses!.mine !== null) return 'enrollment_token_used';
  if (toInt(uses!.n) >= row.max_workers) return 'enrollment_token_exhausted';
  return null;
}

/**
 * Why the worker itself may not enroll with a token good for its id (issue 27 item 10), or null:
 * disabled (as renewal refuses it), or, for a pattern token without `may_replace`, an id that has a
 * current unexpired certificate or a live session — a token for many ids must not take one over.
 * Under the worker's lock (the one register and renewal take), so neither can change until commit.
 */
async function workerRefusal(
  tx: SqlTransaction,
  row: TokenRow,
  workerId: string,
): Promise<EnrollmentRefusal | null> {
  await tx.lock(`worker:${workerId}`);
  const state = await tx.one<{ disabled: boolean | number | null; live: number | null }>(
    `SELECT (SELECT disabled FROM workers WHERE worker_id = :workerId) AS disabled,
            (SELECT 1 FROM worker_certificates WHERE worker_id = :workerId AND superseded_by IS NULL
               AND revoked_at IS NULL AND not_after > {now}
             UNION ALL
             SELECT 1 FROM workers WHERE worker_id = :workerId AND status IN ('online', 'draining')
               AND lease_expires_at > {now}
             LIMIT 1) AS live`,
    { workerId },
  );
  if (isTrue(state!.disabled ?? false)) return 'worker_disabled';
  if (row.pattern !== null && !isTrue(row.may_replace) && state!.live !== null)
    return 'enrollment_token_may_not_replace';
  return null;
}

function toRecord(row: ListedRow): EnrollmentTokenRecord {
  const uses = toInt(row.uses);
  const revokedAt = toMsOrNull(row.revoked_at);
  return {
    id: row.id,
    workerId: row.worker_id,
    pattern: row.pattern,
    maxWorkers: toInt(row.max_workers),
    uses,
    status:
      revokedAt !== null
        ? 'revoked'
        : isTrue(row.expired)
          ? 'expired'
          : uses >= row.max_workers
            ? 'exhausted'
            : 'active',
    expiresAt: toMs(row.expires_at),
    revokedAt,
    mayReplace: isTrue(row.may_replace),
    createdBy: row.created_by,
    createdAt: toMs(row.created_at),
  };
}
