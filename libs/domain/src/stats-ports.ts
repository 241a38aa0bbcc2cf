import type { WorkerStatus } from './sessions';

/** Counts for operations (metrics), read at scrape time; low cardinality by construction. */
export interface OperationalCounts {
  /** Worker rows by effective status, as the admin views show it (ADR 0035; every status present). */
  readonly sessions: Readonly<Record<WorkerStatus, number>>;
  /** Runs by status (every status present, zero when none). */
  readonly runs: Readonly<Record<string, number>>;
  /**
   * Workers whose current session's last heartbeat reported journal records waiting for an operator,
   * and those records summed (ADR 0029).
   */
  readonly recoveryRequired: { readonly workers: number; readonly records: number };
  /**
   * Live workers (online or draining) by software version and registered protocol version (ADR 0060):
   * what a rolling upgrade has reached. At most `WORKER_VERSION_GROUPS` groups, the most workers first;
   * the rest are summed under software `other`.
   */
  readonly versions: readonly WorkerVersionCount[];
}

export interface WorkerVersionCount {
  readonly softwareVersion: string;
  readonly protocolVersion: number;
  readonly workers: number;
}

/** Label sets `ql_worker_versions` exports at most (worker-written text is bounded in cardinality). */
export const WORKER_VERSION_GROUPS = 32;

export interface OperationalStatsRepository {
  /** Two grouped reads, no lock: a scrape never waits for or blocks a claim. */
  counts(): Promise<OperationalCounts>;
}
export const OPERATIONAL_STATS_REPOSITORY = Symbol('OperationalStatsRepository');
