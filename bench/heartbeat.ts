/**
 * Heartbeat compare-and-set through the registry repository, beside its ceiling measured in the same
 * run: the same single-row UPDATE issued raw through the same driver.
 *
 * For each dialect and concurrency N: N workers are registered (one row each, like pgbench clients
 * each updating their own row), then N closed loops run for a fixed window, each awaiting its
 * operation and issuing the next. Variants, alternated round by round on the same rows:
 *   ceiling     `UPDATE workers SET version = version + 1 WHERE worker_id = ?` raw through the driver
 *   repository  SqlWorkerSessionRepository.heartbeat, next expectedVersion = returned version
 *   service     RegistryService.heartbeat with a plain body (heartbeat-edge.ts)
 *   edge        the ingress's edge pipe (HeartbeatDto, class-validator), then the same service call
 *   casSql      (detail) the repository's own heartbeat SQL, bound and issued raw through the driver:
 *               separates what the SQL costs from what the TypeScript around it costs
 */
import { statSync } from 'node:fs';
import BetterSqlite3 from 'better-sqlite3';
import { Pool } from 'pg';
import { systemClock, createIdGenerator } from '@ql/contracts';
import {
  PostgresDatabase,
  SqlDatabase,
  SqlParams,
  SqlWorkerSessionRepository,
  SqliteDatabase,
  compilePostgres,
  compileSqlite,
} from '@ql/persistence';
import { registryOp } from './heartbeat-edge';
import { benchSnapshot, newSessionId } from './lib/fixtures';
import { MeasureWindow, Sample, Settle, closedLoops, median } from './lib/measure';

export const VARIANTS = ['ceiling', 'repository', 'service', 'edge', 'casSql'] as const;
export type VariantName = (typeof VARIANTS)[number];

export interface HeartbeatConfig {
  readonly concurrencies: readonly number[];
  readonly rounds: number;
  readonly window: MeasureWindow;
  /** Also measure the `casSql` detail variant. */
  readonly detail: boolean;
  readonly log: (line: string) => void;
}

export interface HeartbeatRow {
  readonly dialect: 'sqlite' | 'postgres';
  readonly concurrency: number;
  /** Median ops/s per variant. */
  readonly median: Partial<Record<VariantName, number>>;
  /** Median Node CPU µs per operation per variant. */
  readonly cpuUsPerOp: Partial<Record<VariantName, number>>;
  /** Median over rounds of repository / ceiling within the same round (adjacent samples). */
  readonly pairedRatio: number;
  readonly samples: Partial<Record<VariantName, Sample[]>>;
}

export const LEASE_MS = 24 * 60 * 60 * 1000; // never expires during a run, however long it is configured
export const SLOTS = 4;
export const CEILING_SQL = 'UPDATE workers SET version = version + 1 WHERE worker_id = ?';

export interface Worker {
  readonly workerId: string;
  readonly sessionId: string;
  readonly generation: number;
  /** Version the next compare-and-set expects. */
  version: number;
}

/** What one dialect provides for one concurrency level. */
interface Harness {
  readonly ops: Record<VariantName, (w: Worker) => () => Promise<unknown>>;
  /** Re-reads every worker's current version (the ceiling moves it behind the repository's back). */
  syncVersions(workers: Worker[]): Promise<void>;
  /** See `sqliteSettle`. */
  readonly settle?: Settle;
  /** Opens what the variant's sample needs (PostgreSQL: its pool), and closes it after the sample. */
  before?(variant: VariantName): Promise<void>;
  after?(variant: VariantName): Promise<void>;
}

/** Registers `n` workers through the repository and returns their fences. */
export async function registerWorkers(
  repo: SqlWorkerSessionRepository,
  prefix: string,
  n: number,
): Promise<Worker[]> {
  const snapshot = benchSnapshot();
  const workers: Worker[] = [];
  for (let i = 0; i < n; i++) {
    const workerId = `${prefix}-w${i}`;
    const { session } = await repo.register({
      workerId,
      sessionId: newSessionId(),
      snapshot,
      leaseMs: LEASE_MS,
    });
    workers.push({
      workerId,
      sessionId: session.sessionId,
      generation: session.generation,
      version: session.version,
    });
  }
  return workers;
}

export function repositoryOp(repo: SqlWorkerSessionRepository, slots = SLOTS) {
  return (w: Worker) => async () => {
    const session = await repo.heartbeat({
      workerId: w.workerId,
      sessionId: w.sessionId,
      fence: { generation: w.generation, expectedVersion: w.version },
      leaseMs: LEASE_MS,
      availableSlots: slots,
    });
    w.version = session.version;
  };
}

/** The SQL text the repository sends for a heartbeat, captured from one real call (not copied). */
export async function captureHeartbeatSql(db: SqlDatabase, w: Worker): Promise<string> {
  let captured: string | undefined;
  const spy = Object.create(db) as SqlDatabase;
  spy.one = <T>(sql: string, params?: SqlParams) => {
    captured ??= sql;
    return db.one<T>(sql, params);
  };
  await repositoryOp(new SqlWorkerSessionRepository(spy, createIdGenerator()))(w)();
  if (!captured) throw new Error('heartbeat sent no statement through SqlDatabase.one');
  return captured;
}

export function casParams(w: Worker): Record<string, string | number | boolean> {
  return {
    workerId: w.workerId,
    sessionId: w.sessionId,
    generation: w.generation,
    expectedVersion: w.version,
    leaseMs: LEASE_MS,
    slots: SLOTS,
    no: false,
  };
}

async function measureLevel(
  harness: Harness,
  workers: Worker[],
  dialect: HeartbeatRow['dialect'],
  config: HeartbeatConfig,
): Promise<HeartbeatRow> {
  const variants = VARIANTS.filter((v) => config.detail || v !== 'casSql');
  const samples: Partial<Record<VariantName, Sample[]>> = {};
  for (let round = 1; round <= config.rounds; round++) {
    // Alternate, and rotate who goes first so no variant always follows the same one.
    const order = variants.map((_, i) => variants[(i + round - 1) % variants.length]!);
    for (const variant of order) {
      await harness.syncVersions(workers);
      await harness.before?.(variant);
      let sample: Sample;
      try {
        sample = await closedLoops(
          workers.map((w) => harness.ops[variant](w)),
          config.window,
          harness.settle,
        );
      } finally {
        await harness.after?.(variant);
      }
      (samples[variant] ??= []).push(sample);
      config.log(
        `  ${dialect} N=${workers.length} round ${round} ${variant.padEnd(10)} ` +
          `${String(Math.round(sample.opsPerSecond)).padStart(6)} ops/s  ` +
          `${sample.processCpuUsPerOp.toFixed(1)} µs node CPU/op` +
          (sample.detail
            ? `  WAL ${sample.detail.walMiBAtEnd} MiB at window end, checkpoint ${sample.settleMs.toFixed(0)} ms`
            : ''),
      );
    }
  }
  const med: Partial<Record<VariantName, number>> = {};
  const cpu: Partial<Record<VariantName, number>> = {};
  for (const v of variants) {
    med[v] = median(samples[v]!.map((s) => s.opsPerSecond));
    cpu[v] = median(samples[v]!.map((s) => s.processCpuUsPerOp));
  }
  const pairedRatio = median(
    samples.repository!.map((s, i) => s.opsPerSecond / samples.ceiling![i]!.opsPerSecond),
  );
  return { dialect, concurrency: workers.length, median: med, cpuUsPerOp: cpu, pairedRatio, samples };
}

// ---------------------------------------------------------------- SQLite

export interface SqliteInfo {
  readonly sqliteVersion: string;
}

export async function benchSqlite(
  path: string,
  config: HeartbeatConfig,
): Promise<{ rows: HeartbeatRow[]; info: SqliteInfo }> {
  const db = await SqliteDatabase.open({ path }, systemClock, true);
  // The ceiling's own connection to the same file, with the same pragmas as SqliteDatabase.
  const raw = new BetterSqlite3(path, { timeout: 25 });
  try {
    raw.pragma('journal_mode = WAL');
    raw.pragma('synchronous = NORMAL');
    raw.pragma('foreign_keys = ON');
    const sqliteVersion = (raw.prepare('SELECT sqlite_version() AS v').get() as { v: string }).v;
    const repo = new SqlWorkerSessionRepository(db, createIdGenerator());
    const ceiling = raw.prepare(CEILING_SQL);
    const readVersion = raw.prepare('SELECT version FROM workers WHERE worker_id = ?').pluck();
    const rows: HeartbeatRow[] = [];
    for (const n of config.concurrencies) {
      const workers = await registerWorkers(repo, `bench-sqlite-n${n}`, n);
      const cas = compileSqlite(await captureHeartbeatSql(db, workers[0]!));
      const casStatement = raw.prepare(cas.text);
      const harness: Harness = {
        ops: {
          ceiling: (w) => async () => {
            if (ceiling.run(w.workerId).changes !== 1) throw new Error(`ceiling missed ${w.workerId}`);
          },
          repository: repositoryOp(repo),
          service: registryOp(db, repo, LEASE_MS, SLOTS, false),
          edge: registryOp(db, repo, LEASE_MS, SLOTS, true),
          casSql: (w) => async () => {
            // `.all()`, as SqliteDatabase.one does: stepped to completion, so the commit runs the WAL hook
            const row = casStatement.all({ ...casParams(w), no: 0, now: Date.now() })[0] as
              { version: number } | undefined;
            if (!row) throw new Error(`raw CAS missed ${w.workerId}`);
            w.version = row.version;
          },
        },
        syncVersions: async (ws) => {
          for (const w of ws) w.version = readVersion.get(w.workerId) as number;
        },
        settle: sqliteSettle(raw, path),
      };
      rows.push(await measureLevel(harness, workers, 'sqlite', config));
    }
    return { rows, info: { sqliteVersion } };
  } finally {
    raw.close();
    await db.close();
  }
}

/**
 * WAL checkpoints around each SQLite sample, so no variant leaves checkpoint work to the next. It
 * matters whenever a variant defers checkpoints: a write stepped only to its first row (better-sqlite3
 * `.get()` on UPDATE … RETURNING, as the repository did until 393a3c9) commits in sqlite3_reset,
 * where SQLite does not call the WAL hook: the auto-checkpoint never fires and the WAL grows until
 * some statement runs to completion — whose caller then pays for all of it. The WAL size at the end
 * of each window is reported, so such a regression shows.
 *   reset   TRUNCATE checkpoint: every counted window starts with an empty WAL (untimed)
 *   settle  the PASSIVE checkpoint SQLite would run itself at the next completed statement, timed
 *           and charged to the sample; reports the WAL size the window reached first
 */
export function sqliteSettle(raw: BetterSqlite3.Database, path: string): Settle {
  const checkpoint = (mode: 'TRUNCATE' | 'PASSIVE') => {
    const [r] = raw.pragma(`wal_checkpoint(${mode})`) as {
      busy: number;
      log: number;
      checkpointed: number;
    }[];
    if (!r || r.busy || r.checkpointed < r.log)
      throw new Error(`WAL checkpoint (${mode}) could not complete`);
    return r;
  };
  return {
    reset: () => void checkpoint('TRUNCATE'),
    settle: () => {
      const walMiB = statSync(`${path}-wal`).size / 2 ** 20;
      const r = checkpoint('PASSIVE');
      return { walMiBAtEnd: Number(walMiB.toFixed(1)), framesCheckpointedAtEnd: r.checkpointed };
    },
  };
}

// ---------------------------------------------------------------- PostgreSQL

/**
 * Every sample opens its own pool of N connections (the repository's through PostgresDatabase.open,
 * the ceiling's a plain `pg` Pool) and closes it afterwards: only N connections are open at a time,
 * and no pool sits idle long enough for its idle timeout to close connections another sample would
 * then have to reopen. Connecting and preparing statements happen in the warm-up.
 */
export async function benchPostgres(
  url: string,
  config: HeartbeatConfig,
  /** Filled level by level, so the levels done survive a failure in a later one. */
  rows: HeartbeatRow[],
): Promise<void> {
  // Migrate once; the levels then open pools of their own size.
  await (await PostgresDatabase.open({ url, poolSize: 1 }, true)).close();
  const admin = new Pool({ connectionString: url, max: 1, application_name: 'ql-bench-admin' });
  admin.on('error', () => undefined);
  try {
    for (const n of config.concurrencies) {
      const poolSize = Math.max(n, 1);
      let db: PostgresDatabase | undefined = await PostgresDatabase.open({ url, poolSize: 1 }, false);
      let repo = new SqlWorkerSessionRepository(db, createIdGenerator());
      const workers = await registerWorkers(repo, `bench-pg-n${n}`, n);
      const cas = compilePostgres(await captureHeartbeatSql(db, workers[0]!));
      await db.close();
      db = undefined;
      let raw: Pool | undefined;
      const ceilingText = CEILING_SQL.replace('?', '$1');
      const harness: Harness = {
        ops: {
          ceiling: (w) => async () => {
            const r = await raw!.query({ name: 'bench_ceiling', text: ceilingText, values: [w.workerId] });
            if (r.rowCount !== 1) throw new Error(`ceiling missed ${w.workerId}`);
          },
          // built when the sample starts, after `before` opened this sample's repository
          repository: (w) => repositoryOp(repo)(w),
          service: (w) => registryOp(db!, repo, LEASE_MS, SLOTS, false)(w),
          edge: (w) => registryOp(db!, repo, LEASE_MS, SLOTS, true)(w),
          casSql: (w) => async () => {
            const p = casParams(w);
            const r = await raw!.query<{ version: string }>({
              name: 'bench_cas',
              text: cas.text,
              values: cas.names.map((name) => p[name]),
            });
            const row = r.rows[0];
            if (!row) throw new Error(`raw CAS missed ${w.workerId}`);
            w.version = Number(row.version);
          },
        },
        syncVersions: async (ws) => {
          const r = await admin.query<{ worker_id: string; version: string }>(
            'SELECT worker_id, version FROM workers WHERE worker_id = ANY($1)',
            [ws.map((w) => w.workerId)],
          );
          const byId = new Map(r.rows.map((row) => [row.worker_id, Number(row.version)]));
          for (const w of ws) w.version = byId.get(w.workerId)!;
        },
        before: async (variant) => {
          if (variant !== 'ceiling' && variant !== 'casSql') {
            db = await PostgresDatabase.open(
              { url, poolSize, applicationName: 'ql-bench-repository' },
              false,
            );
            repo = new SqlWorkerSessionRepository(db, createIdGenerator());
          } else {
            raw = new Pool({ connectionString: url, max: poolSize, application_name: 'ql-bench-raw' });
            raw.on('error', () => undefined);
          }
        },
        after: async () => {
          await db?.close();
          await raw?.end();
          db = undefined;
          raw = undefined;
        },
      };
      rows.push(await measureLevel(harness, workers, 'postgres', config));
    }
  } finally {
    await admin.end();
  }
}
