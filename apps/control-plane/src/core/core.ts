import { Clock, IdGenerator } from '@ql/domain';
import {
  Repositories,
  SqlDatabase,
  QueueSignals,
  createRepositories,
  openDatabase,
  openQueueSignals,
  parseDatabaseUrl,
} from '@ql/persistence';
import { createIdGenerator, systemClock } from '@ql/contracts';
import { ControlPlaneConfig, secretCipherOf } from '../config/config';
import { ControlPlaneMetrics } from '../metrics/control-plane-metrics';
import { RunLogWaiters } from '../runs/run-log-waiters';
import { OfferWaiters } from '../leases/offer-waiters';
import type { WorkerIssuer } from '../enrollment/worker-issuer';

/** Readiness as `/readyz` reports it (R-OPS-1). */
export class Readiness {
  private started = false;
  private stopping = false;
  markStarted(): void {
    this.started = true;
  }
  markStopping(): void {
    this.stopping = true;
  }
  get state(): 'starting' | 'ready' | 'stopping' {
    return this.stopping ? 'stopping' : this.started ? 'ready' : 'starting';
  }
}

/**
 * Background loops skip their cycles while the schema is missing (a cluster replica waits for
 * `npm run migrate`; main.ts says so once); once applied it is never asked again.
 */
export class MigrationGate {
  private applied = false;
  constructor(private readonly db: Pick<SqlDatabase, 'migrationsApplied'>) {}
  async ready(): Promise<boolean> {
    this.applied ||= await this.db.migrationsApplied();
    return this.applied;
  }
}

/** What both listeners share: one database, one set of repositories, one readiness. */
export interface ControlPlaneCore {
  readonly config: ControlPlaneConfig;
  readonly clock: Clock;
  readonly ids: IdGenerator;
  readonly db: SqlDatabase;
  readonly repositories: Repositories;
  readonly readiness: Readiness;
  readonly migrations: MigrationGate;
  readonly metrics: ControlPlaneMetrics;
  /** Wakes this process's log tails when a chunk or an ending is written here (ADR 0013). */
  readonly logWaiters: RunLogWaiters;
  /** The database's queue signals (SQLite triggers on this connection, or a PostgreSQL LISTEN). */
  readonly queueSignals: QueueSignals;
  /** The pulls held on this process, woken by those signals (long-poll offers, ADR 0019). */
  readonly offerWaiters: OfferWaiters;
  /** The CA that signs enrolled workers' certificates, or none: enrollment answers 503 (ADR 0045 §5). */
  readonly workerIssuer: WorkerIssuer | undefined;
}

export const CORE = Symbol('ControlPlaneCore');
export const CONFIG = Symbol('ControlPlaneConfig');

/** Opens the database; standalone applies migrations itself, cluster replicas wait for `npm run migrate`. */
export async function openCore(
  config: ControlPlaneConfig,
  clock: Clock = systemClock,
  workerIssuer?: WorkerIssuer,
): Promise<ControlPlaneCore> {
  const target = parseDatabaseUrl(config.databaseUrl);
  if (config.profile === 'cluster-control' && target.dialect === 'sqlite') {
    throw new Error('cluster-control refuses SQLite');
  }
  const withOptions =
    target.dialect === 'sqlite'
      ? { ...target, busyRetries: config.sqliteBusyRetries, cacheKiB: config.sqliteCacheMiB * 1024 }
      : { ...target, poolSize: config.dbPoolSize };
  const db = await openDatabase(withOptions, clock, config.profile === 'standalone');
  const ids = createIdGenerator(clock);
  const repositories = createRepositories(db, ids, {
    logCapBytes: config.runLogCapBytes,
    claimBatchMax: config.claimBatchMax,
    secretCipher: secretCipherOf(config),
  });
  const metrics = new ControlPlaneMetrics(repositories.stats);
  const migrations = new MigrationGate(db);
  const queueSignals = openQueueSignals(db);
  return {
    config,
    clock,
    ids,
    db,
    repositories,
    readiness: new Readiness(),
    migrations,
    metrics,
    logWaiters: new RunLogWaiters(),
    queueSignals,
    offerWaiters: new OfferWaiters(queueSignals),
    workerIssuer,
  };
}
