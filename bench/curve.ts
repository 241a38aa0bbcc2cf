// Size: the cost curve's fixtures (built once per size, grown in place), its two measured paths and the
// sweeper share one database per dialect and one alternation discipline; split, each would need the rest.
/**
 * The cost curve (issue 10 item 4): claims/s and heartbeats/s through the repositories at W registered
 * workers × B queued runs, each beside its ceiling measured on the same database in the same cell,
 * and the sweeper's time per cycle at each B. Claim cost must not grow with W or B; heartbeat cost
 * must not grow with W; the sweeper's work per cycle must stay fixed.
 *
 * One database per dialect. The fixture grows in place: B ascending (runs cloned from one template
 * run in one INSERT … SELECT over a series), and inside each B, W ascending (workers cloned from one
 * registered template worker, with their session and label rows). Per cell, alternated round by round:
 *   claim      service  LeasesService.offers (claim.ts serviceOp), N pullers spread over the W workers
 *              ceiling  the bare claim transaction raw through the same driver (claim.ts)
 *   heartbeat  repository  SqlWorkerSessionRepository.heartbeat; N loops, each cycling through its
 *                          share of all W workers (every registered worker heartbeats in turn)
 *              ceiling     `UPDATE workers SET version = version + 1 WHERE worker_id = ?` raw, same rows
 * PostgreSQL: every sample opens its own pool and closes it, so its backends flush their table
 * counters on exit; rows read per operation (pg_stat_user_tables: seq_tup_read + idx_tup_fetch) is
 * the scan detector — it would jump with W or B where a statement scans. SQLite: the statements the
 * measured paths prepared are captured and their EXPLAIN QUERY PLAN checked for full scans and sorts.
 */
import { performance } from 'node:perf_hooks';
import BetterSqlite3 from 'better-sqlite3';
import { Pool } from 'pg';
import { createIdGenerator, systemClock } from '@ql/contracts';
import {
  PostgresDatabase,
  SqlActivationRepository,
  SqlDatabase,
  SqlLeaseRepository,
  SqlWorkerSessionRepository,
  SqliteDatabase,
} from '@ql/persistence';
import {
  BenchWorker,
  LEASE_MS,
  LEASE_TTL_CONFIG,
  postgresCeiling,
  requeueTouchedRuns,
  sample,
  seed,
  serviceOp,
  settle,
  sqliteCeiling,
} from './claim';
import { CEILING_SQL, repositoryOp } from './heartbeat';
import { benchSnapshot, newSessionId } from './lib/fixtures';
import { median } from './lib/measure';

export const CLAIM_VARIANTS = ['ceiling', 'service'] as const;
export const HEARTBEAT_VARIANTS = ['ceiling', 'repository'] as const;
export type ClaimVariant = (typeof CLAIM_VARIANTS)[number];
export type HeartbeatVariant = (typeof HEARTBEAT_VARIANTS)[number];
type Dialect = 'sqlite' | 'postgres';

export interface CurveConfig {
  readonly workers: readonly number[];
  readonly backlogs: readonly number[];
  /** Concurrent pullers / heartbeat loops. */
  readonly concurrency: number;
  readonly rounds: number;
  readonly claims: number;
  readonly claimWarmup: number;
  readonly heartbeats: number;
  readonly heartbeatWarmup: number;
  readonly sweepCycles: number;
  /** Expired leases per measured sweeper cycle (the sweeper's page). */
  readonly sweepPage: number;
  readonly log: (line: string) => void;
}

/** Rows PostgreSQL read per operation (pg_stat_user_tables deltas over the sample, warm-up included). */
export interface Reads {
  /** seq_tup_read + idx_tup_fetch, all tables. */
  readonly rowsPerOp: number;
  readonly seqRowsPerOp: number;
  readonly seqScansPerOp: number;
  readonly byTable: Record<string, number>;
}

export interface CurveSample {
  readonly ops: number;
  readonly seconds: number;
  readonly opsPerSecond: number;
  readonly processCpuUsPerOp: number;
  readonly reads?: Reads;
}

export interface Figure<V extends string> {
  readonly median: Record<V, number>;
  readonly cpuUsPerOp: Record<V, number>;
  /** Median over rounds of figure / ceiling within the same round. */
  readonly pairedRatio: number;
  readonly reads?: Record<V, Reads>;
  readonly samples: Record<V, CurveSample[]>;
}

export interface CurveCell {
  readonly dialect: Dialect;
  readonly backlog: number;
  readonly workers: number;
  readonly claim: Figure<ClaimVariant>;
  readonly heartbeat: Figure<HeartbeatVariant>;
  /**
   * Claims of runs inside an open preference hold for a label no worker has (smallest backlog only):
   * the claim reads the candidate workers (claim-preference.ts) before it takes the run.
   */
  readonly held?: Figure<ClaimVariant>;
}

export interface SweepRow {
  readonly dialect: Dialect;
  readonly backlog: number;
  readonly page: number;
  /** Median ms of a cycle that ends a full page of expired leases (requeues them). */
  readonly fullMs: number;
  /** Median ms of a cycle with nothing due. */
  readonly idleMs: number;
  readonly fullSamples: number[];
  readonly idleSamples: number[];
  /** PostgreSQL: rows read by one full cycle (median), the same counters as the cells'. */
  readonly rowsPerFullCycle?: number;
}

export interface PlanCheck {
  readonly statement: string;
  readonly plan: string[];
  /** Plan lines that scan a whole table or sort: none expected on the measured paths. */
  readonly flagged: string[];
  /**
   * Scans of an index in its order: bounded by the LIMIT only while the filter passes early (the
   * queue head does; a filter most rows fail reads the whole index).
   */
  readonly ordered: string[];
}

export interface CurveResult {
  readonly dialect: Dialect;
  readonly cells: CurveCell[];
  readonly sweeps: SweepRow[];
  readonly fixtures: { what: string; seconds: number }[];
  readonly plans?: PlanCheck[];
}

const CAPACITY = 1024;
const PREFIX = 'curve-w';
const workerIdOf = (g: number) => `${PREFIX}${String(g).padStart(6, '0')}`;
const MAX_WORKERS = 999_999;

export interface Worker {
  readonly workerId: string;
  readonly sessionId: string;
  readonly generation: number;
  version: number;
}

interface Opened<T> {
  readonly op: (x: T) => Promise<unknown>;
  close(): Promise<void>;
}

interface SweepCycle {
  cycle(): Promise<number>;
  /** PostgreSQL: flushes the sweeper backend's table counters now. */
  flush?(): Promise<void>;
  close(): Promise<void>;
}

/** What one dialect provides; the admin database builds fixtures and resets between samples. */
interface Target {
  readonly dialect: Dialect;
  readonly admin: SqlDatabase;
  /** `held`: the service with a preference hold (a day), for the runs that prefer a label nobody has. */
  claim(variant: ClaimVariant, n: number, held?: boolean): Promise<Opened<BenchWorker>>;
  heartbeat(variant: HeartbeatVariant, n: number): Promise<Opened<Worker>>;
  sweeper(page: number): Promise<SweepCycle>;
  /** Deferred work charged to the sample that caused it (SQLite: the WAL checkpoint). */
  settle(): Promise<void>;
  /** PostgreSQL: per-table counters, after every backend that read has flushed them. */
  counters?(): Promise<Map<string, TableCounters>>;
  /** Vacuums (PostgreSQL) the tables a reset rewrote. */
  tidy(tables: readonly string[], analyze: boolean): Promise<void>;
  plans?(): PlanCheck[];
  close(): Promise<void>;
}

interface TableCounters {
  seqScan: number;
  seqRead: number;
  idxFetch: number;
}

/** All slots stay free: a heartbeat must not shrink what the pullers of the next sample may hold. */
function heartbeatOp(repo: SqlWorkerSessionRepository) {
  const op = repositoryOp(repo, CAPACITY);
  return (w: Worker) => op(w)();
}

/** One sweeper cycle as LeaseSweeperService.sweepOnce runs it (without its metrics and logs). */
function sweepCycle(db: SqlDatabase, page: number): () => Promise<number> {
  const ids = createIdGenerator();
  const leases = new SqlLeaseRepository(db, ids);
  const activation = new SqlActivationRepository(db);
  return async () => {
    const swept = await leases.sweep(page);
    const deadlines = await activation.sweepDeadlines(page, 30_000);
    return (
      Object.values(swept).reduce((a, b) => a + b, 0) + Object.values(deadlines).reduce((a, b) => a + b, 0)
    );
  };
}

// ---------------------------------------------------------------- fixtures

interface Series {
  /** `g` as 12 hex digits / 6 decimal digits, and a text cast to the dialect's uuid. */
  hex12(g: string): string;
  dec6(g: string): string;
  uuid(text: string): string;
}

const SERIES: Record<Dialect, Series> = {
  postgres: {
    hex12: (g) => `lpad(to_hex(${g}), 12, '0')`,
    dec6: (g) => `lpad(${g}::text, 6, '0')`,
    uuid: (t) => `CAST(${t} AS uuid)`,
  },
  sqlite: {
    hex12: (g) => `printf('%012x', ${g})`,
    dec6: (g) => `printf('%06d', ${g})`,
    uuid: (t) => t,
  },
};

/**
 * Copies the template row(s) of `table` (`where`, alias `t`) once per g in [from, to], every column as
 * it is except `overrides` (SQL over `g`): one statement, whatever columns other migrations add.
 */
async function cloneRows(
  db: SqlDatabase,
  table: string,
  where: string,
  params: Record<string, string | number>,
  overrides: Record<string, string>,
  from: number,
  to: number,
): Promise<number> {
  if (to < from) return 0;
  const sample = await db.one<Record<string, unknown>>(
    `SELECT * FROM ${table} t WHERE ${where} LIMIT 1`,
    params,
  );
  if (!sample) throw new Error(`no template row in ${table}`);
  const columns = Object.keys(sample);
  const select = columns.map((c) => overrides[c] ?? `t.${c}`).join(', ');
  const insert = `INSERT INTO ${table} (${columns.join(', ')}) SELECT ${select}`;
  const sql =
    db.dialect === 'postgres'
      ? `${insert} FROM ${table} t, generate_series(CAST(:from AS bigint), CAST(:to AS bigint)) AS s(g) WHERE ${where}`
      : `WITH RECURSIVE s(g) AS (SELECT :from UNION ALL SELECT g + 1 FROM s WHERE g < :to)
         ${insert} FROM ${table} t, s WHERE ${where}`;
  return db.run(sql, { ...params, from, to });
}

/** Queued runs 1 … backlog-1 cloned from run 0 (claim.ts seed), queue_order = g, ids in queue order. */
async function growRuns(db: SqlDatabase, template: string, have: number, backlog: number): Promise<void> {
  const s = SERIES[db.dialect];
  await cloneRows(
    db,
    'runs',
    't.id = :template',
    { template },
    { id: s.uuid(`'00000000-0000-7000-8000-' || ${s.hex12('g')}`), queue_order: 'g' },
    have,
    backlog - 1,
  );
}

/** Exactly `count` registered workers: clones of worker 0 (with session and label rows), or fewer. */
async function setWorkers(db: SqlDatabase, have: number, count: number): Promise<void> {
  if (count < have) {
    for (const table of ['worker_labels', 'worker_sessions', 'workers'])
      await db.run(`DELETE FROM ${table} WHERE worker_id >= :first AND worker_id LIKE 'curve-w%'`, {
        first: workerIdOf(count),
      });
    return;
  }
  const s = SERIES[db.dialect];
  const worker = `'${PREFIX}' || ${s.dec6('g')}`;
  const session = s.uuid(`'00000000-0000-7000-9000-' || ${s.hex12('g')}`);
  const template = { template: workerIdOf(0) };
  const where = 't.worker_id = :template';
  await cloneRows(
    db,
    'workers',
    where,
    template,
    { worker_id: worker, session_id: session },
    have,
    count - 1,
  );
  await cloneRows(
    db,
    'worker_sessions',
    where,
    template,
    { worker_id: worker, session_id: session },
    have,
    count - 1,
  );
  await cloneRows(db, 'worker_labels', where, template, { worker_id: worker }, have, count - 1);
}

async function readWorkers(db: SqlDatabase): Promise<Worker[]> {
  const rows = await db.many<{
    worker_id: string;
    session_id: string;
    generation: number;
    version: number | string;
  }>(
    `SELECT worker_id, session_id, generation, version FROM workers WHERE worker_id LIKE 'curve-w%' ORDER BY worker_id`,
  );
  return rows.map((r) => ({
    workerId: r.worker_id,
    sessionId: r.session_id,
    generation: Number(r.generation),
    version: Number(r.version),
  }));
}

/**
 * The runs that prefer a label no worker has: ids `…-a000-<g>`, priority 1 (ahead of the backlog),
 * parked as `cancelled` (outside the queue) except during a `held` sample.
 */
const HELD_IDS = { lo: '00000000-0000-7000-a000-000000000000', hi: '00000000-0000-7000-a000-ffffffffffff' };
export const NOBODY_LABEL = { key: 'pool', value: 'curve-nobody', weight: 10 };
export const HOLD_CONFIG = { ...LEASE_TTL_CONFIG, placementPreferenceHoldMs: 24 * 60 * 60 * 1000 };

async function addHeldRuns(db: SqlDatabase, template: string, count: number): Promise<void> {
  const row = await db.one<{ placement_json: string }>(
    'SELECT placement_json FROM runs WHERE id = :template',
    {
      template,
    },
  );
  const placement = { ...(JSON.parse(row!.placement_json) as object), preferred: [NOBODY_LABEL] };
  const s = SERIES[db.dialect];
  await cloneRows(
    db,
    'runs',
    't.id = :template',
    { template, placement: JSON.stringify(placement) },
    {
      id: s.uuid(`'00000000-0000-7000-a000-' || ${s.hex12('g')}`),
      status: `'cancelled'`,
      priority: '1',
      placement_json: ':placement',
    },
    1,
    count,
  );
}

/** Back to the full backlog and no leases: only the rows a sample touched are rewritten (by index). */
async function reset(target: Target): Promise<void> {
  await target.admin.transaction(async (tx) => {
    await requeueTouchedRuns(tx);
    await tx.run(
      `UPDATE runs SET status = 'cancelled' WHERE id BETWEEN :lo AND :hi AND status <> 'cancelled'`,
      HELD_IDS,
    );
  });
  await target.tidy(['runs', 'run_leases', 'attempts', 'run_events', 'workers'], false);
  await target.settle();
}

// ---------------------------------------------------------------- measuring

function diffReads(
  before: Map<string, TableCounters>,
  after: Map<string, TableCounters>,
  ops: number,
): Reads {
  let rows = 0;
  let seqRows = 0;
  let seqScans = 0;
  const byTable: Record<string, number> = {};
  for (const [table, a] of after) {
    const b = before.get(table) ?? { seqScan: 0, seqRead: 0, idxFetch: 0 };
    const read = a.seqRead - b.seqRead + (a.idxFetch - b.idxFetch);
    rows += read;
    seqRows += a.seqRead - b.seqRead;
    seqScans += a.seqScan - b.seqScan;
    if (read > 0) byTable[table] = Number((read / ops).toFixed(2));
  }
  return { rowsPerOp: rows / ops, seqRowsPerOp: seqRows / ops, seqScansPerOp: seqScans / ops, byTable };
}

/** One sample: open the variant (its own pool), run `count` ops after `warmup`, close, read counters. */
async function measure<T, L>(
  target: Target,
  opened: Promise<Opened<T>>,
  loops: readonly L[],
  pick: (loop: L) => T,
  count: number,
  warmup: number,
): Promise<CurveSample> {
  const before = await target.counters?.();
  const o = await opened;
  let s: Awaited<ReturnType<typeof sample>>;
  try {
    s = await sample(
      (loop: L) => o.op(pick(loop)),
      loops,
      count,
      warmup,
      () => target.settle(),
    );
  } finally {
    await o.close();
  }
  const after = await target.counters?.();
  return {
    ops: s.claims,
    seconds: s.seconds,
    opsPerSecond: s.opsPerSecond,
    processCpuUsPerOp: s.processCpuUsPerOp,
    ...(before && after ? { reads: diffReads(before, after, count + warmup) } : {}),
  };
}

function summarise<V extends string>(
  variants: readonly V[],
  samples: Record<V, CurveSample[]>,
  figure: V,
  ceiling: V,
): Figure<V> {
  const pick = (f: (s: CurveSample) => number) =>
    Object.fromEntries(variants.map((v) => [v, median(samples[v].map(f))])) as Record<V, number>;
  const reads = samples[figure][0]?.reads
    ? (Object.fromEntries(
        variants.map((v) => {
          const list = samples[v].map((s) => s.reads!);
          const mid = [...list].sort((a, b) => a.rowsPerOp - b.rowsPerOp)[list.length >> 1]!;
          return [v, mid];
        }),
      ) as Record<V, Reads>)
    : undefined;
  return {
    median: pick((s) => s.opsPerSecond),
    cpuUsPerOp: pick((s) => s.processCpuUsPerOp),
    pairedRatio: median(samples[figure].map((s, i) => s.opsPerSecond / samples[ceiling][i]!.opsPerSecond)),
    ...(reads ? { reads } : {}),
    samples,
  };
}

/** Alternates the variants round by round (the order flips each round); `one` measures one sample. */
async function alternate<V extends string>(
  variants: readonly V[],
  rounds: number,
  one: (v: V) => Promise<CurveSample>,
): Promise<Record<V, CurveSample[]>> {
  const samples = Object.fromEntries(variants.map((v) => [v, []])) as unknown as Record<V, CurveSample[]>;
  for (let round = 0; round < rounds; round++) {
    const order = round % 2 === 0 ? variants : [...variants].reverse();
    for (const v of order) samples[v].push(await one(v));
  }
  return samples;
}

interface Loop {
  readonly list: Worker[];
  next: number;
}

async function measureCell(
  target: Target,
  config: CurveConfig,
  backlog: number,
  count: number,
): Promise<CurveCell> {
  const n = config.concurrency;
  const tag = `${target.dialect} B=${backlog} W=${count}`;
  const claimRounds = (held: boolean) =>
    alternate(CLAIM_VARIANTS, config.rounds, async (variant) => {
      await reset(target);
      // Queued now, so the hold (counted from queue_order) is open for the whole sample.
      if (held)
        await target.admin.run(
          `UPDATE runs SET status = 'queued', queue_order = {nowMs} WHERE id BETWEEN :lo AND :hi`,
          HELD_IDS,
        );
      const all = await readWorkers(target.admin);
      // N pullers spread over the registered workers.
      const pullers = Array.from({ length: n }, (_, k) => all[Math.floor((k * all.length) / n)]!);
      const s = await measure(
        target,
        target.claim(variant, n, held),
        pullers,
        (w) => w,
        config.claims,
        config.claimWarmup,
      );
      config.log(
        `${tag} claim${held ? ' (held)' : ''} ${variant}: ${s.opsPerSecond.toFixed(0)}/s${readsNote(s)}`,
      );
      return s;
    });
  const claims = await claimRounds(false);
  const held = backlog === Math.min(...config.backlogs) ? await claimRounds(true) : undefined;
  const heartbeats = await alternate(HEARTBEAT_VARIANTS, config.rounds, async (variant) => {
    const all = await readWorkers(target.admin);
    // Loop k heartbeats workers k, k+N, k+2N, …: every registered worker in turn, never two at once.
    const loops: Loop[] = Array.from({ length: n }, (_, k) => ({
      list: all.filter((_w, i) => i % n === k),
      next: Math.floor(Math.random() * all.length),
    }));
    const s = await measure(
      target,
      target.heartbeat(variant, n),
      loops,
      (loop) => loop.list[loop.next++ % loop.list.length]!,
      config.heartbeats,
      config.heartbeatWarmup,
    );
    config.log(`${tag} heartbeat ${variant}: ${s.opsPerSecond.toFixed(0)}/s${readsNote(s)}`);
    return s;
  });
  return {
    dialect: target.dialect,
    backlog,
    workers: count,
    claim: summarise(CLAIM_VARIANTS, claims, 'service', 'ceiling'),
    heartbeat: summarise(HEARTBEAT_VARIANTS, heartbeats, 'repository', 'ceiling'),
    ...(held ? { held: summarise(CLAIM_VARIANTS, held, 'service', 'ceiling') } : {}),
  };
}

function readsNote(s: CurveSample): string {
  return s.reads
    ? `, ${s.reads.rowsPerOp.toFixed(1)} rows read/op (${s.reads.seqRowsPerOp.toFixed(1)} by seq scan)`
    : '';
}

/**
 * The sweeper at this backlog: per repetition, `page` runs are claimed (untimed), a cycle with nothing
 * due is timed, the leases are made expired, and the cycle that requeues them all is timed.
 */
async function measureSweeper(target: Target, config: CurveConfig, backlog: number): Promise<SweepRow> {
  const full: number[] = [];
  const rows: number[] = [];
  const idle: number[] = [];
  const page = config.sweepPage;
  // One connection for all cycles at this backlog; an untimed idle cycle prepares its statements first.
  const sweeper = await target.sweeper(page);
  try {
    await sweeper.cycle();
    for (let c = 0; c < config.sweepCycles; c++) {
      await reset(target);
      const pullers = (await readWorkers(target.admin)).slice(0, config.concurrency);
      await measure(target, target.claim('service', config.concurrency), pullers, (w) => w, page, 0);
      let t = performance.now();
      const none = await sweeper.cycle();
      idle.push(performance.now() - t);
      if (none !== 0) throw new Error(`an idle sweeper cycle handled ${none} items`);
      await target.admin.run(`UPDATE run_leases SET expires_at = {now + :back} WHERE state = 'active'`, {
        back: -60_000,
      });
      await target.settle();
      const before = await target.counters?.();
      t = performance.now();
      const handled = await sweeper.cycle();
      full.push(performance.now() - t);
      await sweeper.flush?.();
      const after = await target.counters?.();
      if (before && after) rows.push(diffReads(before, after, 1).rowsPerOp);
      if (handled !== page)
        throw new Error(`a full sweeper cycle handled ${handled} of ${page} expired leases`);
    }
  } finally {
    await sweeper.close();
  }
  const row = {
    dialect: target.dialect,
    backlog,
    page,
    fullMs: median(full),
    idleMs: median(idle),
    fullSamples: full,
    idleSamples: idle,
    ...(rows.length ? { rowsPerFullCycle: median(rows) } : {}),
  };
  config.log(
    `${target.dialect} B=${backlog} sweeper: ${row.fullMs.toFixed(1)} ms per cycle of ${page} expired leases, ` +
      `${row.idleMs.toFixed(2)} ms idle`,
  );
  return row;
}

/** Every cell of one dialect on one database, the fixture grown in place. */
async function runCurve(target: Target, config: CurveConfig, result: CurveResult): Promise<void> {
  const workers = [...config.workers].sort((a, b) => a - b);
  const backlogs = [...config.backlogs].sort((a, b) => a - b);
  if (workers[workers.length - 1]! > MAX_WORKERS) throw new Error(`at most ${MAX_WORKERS} workers`);
  const db = target.admin;
  const ids = createIdGenerator();
  await seed(db, ids, 1, 0);
  const template = (await db.one<{ id: string }>('SELECT id FROM runs LIMIT 1'))!.id;
  await new SqlWorkerSessionRepository(db, ids).register({
    workerId: workerIdOf(0),
    sessionId: newSessionId(),
    snapshot: { ...benchSnapshot(), maxConcurrentRuns: CAPACITY, availableSlots: CAPACITY },
    leaseMs: LEASE_MS,
  });
  await addHeldRuns(db, template, config.claims + config.claimWarmup);
  let runs = 1;
  let registered = 1;
  const timed = async (what: string, fn: () => Promise<void>) => {
    const t = performance.now();
    await fn();
    const seconds = (performance.now() - t) / 1000;
    result.fixtures.push({ what, seconds });
    config.log(`${target.dialect}: ${what} in ${seconds.toFixed(1)} s`);
  };
  for (const backlog of backlogs) {
    await reset(target);
    await timed(`runs ${runs} → ${backlog}`, async () => {
      await growRuns(db, template, runs, backlog);
      await target.tidy(['runs'], true);
    });
    runs = backlog;
    for (const count of workers) {
      await timed(`workers ${registered} → ${count}`, async () => {
        await setWorkers(db, registered, count);
        await target.tidy(['workers', 'worker_sessions', 'worker_labels'], true);
      });
      registered = count;
      result.cells.push(await measureCell(target, config, backlog, count));
    }
    result.sweeps.push(await measureSweeper(target, config, backlog));
  }
}

// ---------------------------------------------------------------- dialects

const FULL_SCAN = /^(SCAN \w+$|SCAN \w+ (?!USING)|USE TEMP B-TREE)/;
const ORDERED_SCAN = /^SCAN \w+ USING (COVERING )?INDEX/;

/** SQLite: one file, the repositories on SqliteDatabase's connection, the ceilings on their own. */
export async function curveSqlite(path: string, config: CurveConfig): Promise<CurveResult> {
  const db = await SqliteDatabase.open({ path }, systemClock);
  const ids = createIdGenerator();
  // The statements the measured paths prepare (SqliteDatabase prepares each text once).
  const captured = new Set<string>();
  let capturing = false;
  const prepare = db.native.prepare.bind(db.native);
  db.native.prepare = ((sql: string) => {
    if (capturing) captured.add(sql);
    return prepare(sql);
  }) as typeof db.native.prepare;
  const capture = <T>(op: (x: T) => Promise<unknown>): Opened<T> => {
    capturing = true;
    return { op, close: async () => void (capturing = false) };
  };
  const target: Target = {
    dialect: 'sqlite',
    admin: db,
    claim: async (variant, _n, held) => {
      if (variant === 'service') return capture(serviceOp(db, ids, held ? HOLD_CONFIG : undefined));
      const ceiling = sqliteCeiling(path, ids);
      return { op: ceiling.op, close: async () => ceiling.close() };
    },
    heartbeat: async (variant) => {
      if (variant === 'repository') return capture(heartbeatOp(new SqlWorkerSessionRepository(db, ids)));
      const raw = new BetterSqlite3(path, { timeout: 25 });
      raw.pragma('journal_mode = WAL');
      raw.pragma('synchronous = NORMAL');
      const update = raw.prepare(CEILING_SQL);
      return {
        op: async (w) => {
          if (update.run(w.workerId).changes !== 1) throw new Error(`ceiling missed ${w.workerId}`);
        },
        close: async () => void raw.close(),
      };
    },
    sweeper: async (page) => {
      const cycle = sweepCycle(db, page);
      return {
        cycle: async () => {
          capturing = true;
          try {
            return await cycle();
          } finally {
            capturing = false;
          }
        },
        close: async () => undefined,
      };
    },
    settle: () => settle(db),
    tidy: async () => undefined,
    plans: () =>
      [...captured].map((statement) => {
        const params = Object.fromEntries(
          [...statement.matchAll(/(?<![:\w]):([A-Za-z_]\w*)/g)].map((m) => [m[1]!, null]),
        );
        const plan = (prepare(`EXPLAIN QUERY PLAN ${statement}`).all(params) as { detail: string }[]).map(
          (r) => r.detail,
        );
        return {
          statement: statement.replace(/\s+/g, ' ').trim(),
          plan,
          flagged: plan.filter((l) => FULL_SCAN.test(l)),
          ordered: plan.filter((l) => ORDERED_SCAN.test(l)),
        };
      }),
    close: () => db.close(),
  };
  const result: CurveResult = { dialect: 'sqlite', cells: [], sweeps: [], fixtures: [] };
  try {
    await runCurve(target, config, result);
    return { ...result, plans: target.plans!() };
  } finally {
    await target.close();
  }
}

const STATS = `SELECT relname, seq_scan, seq_tup_read, COALESCE(idx_tup_fetch, 0) AS idx_tup_fetch
  FROM pg_stat_user_tables`;

/**
 * PostgreSQL on a fresh database: the admin connection (one) builds and resets; each sample opens its
 * own pool of N and closes it (its backends flush their counters on exit).
 */
export async function curvePostgres(
  url: string,
  config: CurveConfig,
  /** Filled as cells complete, so a failure later keeps what was measured. */
  result: CurveResult,
): Promise<void> {
  const admin = await PostgresDatabase.open(
    { url, poolSize: 1, applicationName: 'ql-bench-curve-admin' },
    true,
  );
  const ids = createIdGenerator();
  const pool = (n: number) => {
    const p = new Pool({ connectionString: url, max: n, application_name: 'ql-bench-curve-raw' });
    p.on('error', () => undefined);
    return p;
  };
  const database = (n: number) =>
    PostgresDatabase.open({ url, poolSize: n, applicationName: 'ql-bench-curve' }, false);
  const ceilingText = CEILING_SQL.replace('?', '$1');
  const target: Target = {
    dialect: 'postgres',
    admin,
    claim: async (variant, n, held) => {
      if (variant === 'service') {
        const db = await database(n);
        return { op: serviceOp(db, ids, held ? HOLD_CONFIG : undefined), close: () => db.close() };
      }
      const raw = pool(n);
      return { op: postgresCeiling(raw, ids), close: () => raw.end() };
    },
    heartbeat: async (variant, n) => {
      if (variant === 'repository') {
        const db = await database(n);
        return { op: heartbeatOp(new SqlWorkerSessionRepository(db, ids)), close: () => db.close() };
      }
      const raw = pool(n);
      return {
        op: async (w) => {
          const r = await raw.query({ name: 'curve_hb_ceiling', text: ceilingText, values: [w.workerId] });
          if (r.rowCount !== 1) throw new Error(`ceiling missed ${w.workerId}`);
        },
        close: () => raw.end(),
      };
    },
    sweeper: async (page) => {
      const db = await database(1);
      await db.ping(); // connected before the first timed cycle
      return {
        cycle: sweepCycle(db, page),
        flush: async () => void (await db.one('SELECT pg_stat_force_next_flush()')),
        close: () => db.close(),
      };
    },
    settle: async () => undefined,
    counters: async () => {
      // The admin backend's own writes (resets) are flushed now, not later inside someone's sample.
      await admin.one('SELECT pg_stat_force_next_flush()');
      const rows = await admin.many<{
        relname: string;
        seq_scan: string;
        seq_tup_read: string;
        idx_tup_fetch: string;
      }>(STATS);
      return new Map(
        rows.map((r) => [
          r.relname,
          { seqScan: Number(r.seq_scan), seqRead: Number(r.seq_tup_read), idxFetch: Number(r.idx_tup_fetch) },
        ]),
      );
    },
    tidy: async (tables, analyze) => {
      await admin.run(`VACUUM ${analyze ? '(ANALYZE) ' : ''}${tables.join(', ')}`);
    },
    close: () => admin.close(),
  };
  try {
    await runCurve(target, config, result);
  } finally {
    await target.close();
  }
}
