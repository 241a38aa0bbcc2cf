import { Clock, IdGenerator } from '@ql/domain';
import { SqlApiKeyRepository } from './api-key.repository';
import { SqlAuditRepository } from './audit.repository';
import { SqlCertificateRevocationRepository } from './certificate-revocation.repository';
import { SqlEnrollmentTokenRepository } from './enrollment-token.repository';
import { SqlConsoleSessionRepository } from './console-session.repository';
import { SqlWorkerCertificateRepository } from './worker-certificate.repository';
import { PostgresDatabase } from './postgres/postgres-database';
import { SqlDatabase } from './sql-executor';
import { QueueSignals } from './queue-signals';
import { SqliteDatabase } from './sqlite/sqlite-database';
import { SqlWorkerSessionRepository } from './worker-session.repository';
import { SqlTaskRepository } from './task.repository';
import { SqlRunRepository } from './run.repository';
import { SqlOperationalStatsRepository } from './stats.repository';
import { SqlLeaseRepository } from './lease.repository';
import { DEFAULT_CLAIM_BATCH } from './claim-batch';
import { SqlActivationRepository } from './activation.repository';
import { SqlSecretRepository } from './secret.repository';
import { SqlEnvVarRepository } from './env-var.repository';
import { SqlBundleRepository } from './bundle.repository';
import { SqlPlaneSecretKeyRepository } from './plane-secret-keys.repository';
import { SecretCipher } from '@ql/domain';

export type DatabaseTarget =
  | {
      readonly dialect: 'sqlite';
      readonly path: string;
      readonly busyRetries?: number;
      /** The page cache's bound, KiB (ADR 0053); undefined: the driver's default. */
      readonly cacheKiB?: number;
    }
  | { readonly dialect: 'postgres'; readonly url: string; readonly poolSize?: number };

/** Parses `sqlite:<path>` or `postgres://…` / `postgresql://…`. */
export function parseDatabaseUrl(url: string): DatabaseTarget {
  if (url.startsWith('sqlite:')) {
    const path = url.slice('sqlite:'.length).replace(/^\/\//, '');
    if (!path) throw new Error('QL_DATABASE_URL: sqlite: needs a file path, e.g. sqlite:./var/ql.sqlite');
    return { dialect: 'sqlite', path };
  }
  if (/^postgres(ql)?:\/\//.test(url)) return { dialect: 'postgres', url };
  throw new Error('QL_DATABASE_URL must start with sqlite: or postgres://');
}

export async function openDatabase(
  target: DatabaseTarget,
  clock: Clock,
  migrate: boolean,
): Promise<SqlDatabase> {
  return target.dialect === 'sqlite'
    ? SqliteDatabase.open(
        { path: target.path, busyRetries: target.busyRetries, cacheKiB: target.cacheKiB },
        clock,
        migrate,
      )
    : PostgresDatabase.open({ url: target.url, poolSize: target.poolSize }, migrate);
}

/** The database's queue signals (ADR 0019): the SQLite connection's own, or a PostgreSQL listener. */
export function openQueueSignals(db: SqlDatabase): QueueSignals {
  if (db instanceof SqliteDatabase || db instanceof PostgresDatabase) return db.signals();
  return {
    subscribe: () => () => undefined,
    whenListening: async () => undefined,
    close: async () => undefined,
  };
}

export interface Repositories {
  readonly sessions: SqlWorkerSessionRepository;
  readonly apiKeys: SqlApiKeyRepository;
  readonly consoleSessions: SqlConsoleSessionRepository;
  readonly audit: SqlAuditRepository;
  readonly revocations: SqlCertificateRevocationRepository;
  readonly enrollmentTokens: SqlEnrollmentTokenRepository;
  readonly workerCertificates: SqlWorkerCertificateRepository;
  readonly tasks: SqlTaskRepository;
  readonly runs: SqlRunRepository;
  readonly leases: SqlLeaseRepository;
  readonly stats: SqlOperationalStatsRepository;
  readonly activation: SqlActivationRepository;
  readonly secrets: SqlSecretRepository;
  readonly envVars: SqlEnvVarRepository;
  readonly bundles: SqlBundleRepository;
  readonly planeSecretKeys: SqlPlaneSecretKeyRepository;
}

/**
 * `secretCipher`: the keys secrets are sealed with (ADR 0050); without it secrets cannot be stored or
 * delivered. `logCapBytes`: the per-run cap of stored output (the domain's default when not given);
 * `claimBatchMax`: claims one PostgreSQL claim statement carries at most (ADR 0027).
 */
export function createRepositories(
  db: SqlDatabase,
  ids: IdGenerator,
  options: { logCapBytes?: number; claimBatchMax?: number; secretCipher?: SecretCipher } = {},
): Repositories {
  const secrets = new SqlSecretRepository(db, ids, options.secretCipher);
  return {
    sessions: new SqlWorkerSessionRepository(db, ids),
    apiKeys: new SqlApiKeyRepository(db, ids),
    consoleSessions: new SqlConsoleSessionRepository(db, ids),
    audit: new SqlAuditRepository(db),
    revocations: new SqlCertificateRevocationRepository(db, ids),
    enrollmentTokens: new SqlEnrollmentTokenRepository(db, ids),
    workerCertificates: new SqlWorkerCertificateRepository(db, ids),
    tasks: new SqlTaskRepository(db, ids),
    runs: new SqlRunRepository(db, ids),
    leases: new SqlLeaseRepository(db, ids, {
      ...DEFAULT_CLAIM_BATCH,
      maxSize: options.claimBatchMax ?? DEFAULT_CLAIM_BATCH.maxSize,
    }),
    stats: new SqlOperationalStatsRepository(db),
    activation: new SqlActivationRepository(db, {
      logCapBytes: options.logCapBytes,
      redaction: secrets.redaction,
    }),
    secrets,
    envVars: new SqlEnvVarRepository(db, ids, options.secretCipher),
    bundles: new SqlBundleRepository(db, ids),
    planeSecretKeys: new SqlPlaneSecretKeyRepository(db),
  };
}
