// Size: the claim benchmark's variants (bare statement, repository, service, graphile-worker peer) must
// be measured in one run with one harness to be comparable.
/**
 * Claim throughput (pull → committed lease), beside its ceiling measured in the same run, and
 * graphile-worker as a peer on the same PostgreSQL.
 *
 * For each dialect and backlog B (queued runs), N workers (one session each, capacity 1024) pull
 * concurrently until M claims have committed; ops/s = M / elapsed. Variants, alternated and rotated
 * round by round on the same database, which is reset to B queued runs before every sample:
 *   service   LeasesService.offers — the server side of `POST …/offers` without HTTP/TLS: strict body
 *             parse, token digest, the repository claim (session fence, replay lookup, capacity under
 *             the worker lock, candidate page, placement, SKIP LOCKED pick, CAS, attempt, lease, events;
 *             on PostgreSQL one call of ql_claim in the steady state, ADR 0016) and the offer projection
 *   ceiling   the bare claim transaction written by hand and issued raw through the same driver: lock
 *             the worker row, take the first queued run (SKIP LOCKED), insert attempt and lease, move the
 *             run, append its two events — what any correct claim must write, nothing it may skip
 *   graphile  graphile-worker 0.16 running no-op jobs at concurrency N over a backlog of B (PostgreSQL),
 *             in the same database, sampled in the same rounds (the order rotates), its queue topped back
 *             up to B between samples as ours is reset: `service / graphile` is paired per round too
 */
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import BetterSqlite3 from 'better-sqlite3';
import { Pool, PoolClient } from 'pg';
import { createIdGenerator, systemClock } from '@ql/contracts';
import { IdGenerator, parseTaskSpec } from '@ql/domain';
import {
  ClaimBatchOptions,
  DEFAULT_CLAIM_BATCH,
  PostgresDatabase,
  SqlDatabase,
  SqlExecutor,
  SqlLeaseRepository,
  SqlOperationalStatsRepository,
  SqlTaskRepository,
  SqlWorkerSessionRepository,
  SqliteDatabase,
} from '@ql/persistence';
import { LeasesService } from '../apps/control-plane/src/leases/leases.service';
import { OfferWaiters } from '../apps/control-plane/src/leases/offer-waiters';
import { ControlPlaneMetrics } from '../apps/control-plane/src/metrics/control-plane-metrics';
import type { ControlPlaneConfig } from '../apps/control-plane/src/config/config';
import type { WorkerPrincipal } from '../apps/control-plane/src/identity/worker-principal';
import { benchSnapshot, newSessionId } from './lib/fixtures';
import { median } from './lib/measure';
import { planeSqliteCacheKiB } from './lib/plane';
import { GraphilePeerQueue, openGraphilePeer } from './peer-graphile';

export const CLAIM_VARIANTS = ['ceiling', 'service'] as const;
export type ClaimVariant = (typeof CLAIM_VARIANTS)[number];

export interface ClaimConfig {
  readonly concurrencies: readonly number[];
  readonly backlogs: readonly number[];
  readonly rounds: number;
  /** Claims per sample for a backlog (each sample starts from a full backlog). */
  readonly claimsPerSample: (backlog: number) => number;
  readonly warmupClaims: number;
  readonly peer: boolean;
  readonly log: (line: string) => void;
}

export interface ClaimSample {
  readonly claims: number;
  readonly seconds: number;
  readonly opsPerSecond: number;
  readonly processCpuUsPerOp: number;
}

export interface ClaimRow {
  readonly dialect: 'sqlite' | 'postgres';
  readonly backlog: number;
  readonly concurrency: number;
  readonly median: Record<ClaimVariant, number>;
  readonly cpuUsPerOp: Record<ClaimVariant, number>;
  /** Median over rounds of service / ceiling within the same round. */
  readonly pairedRatio: number;
  readonly peer?: {
    /** Median over rounds. */
    readonly jobsPerSecond: number;
    readonly processCpuUsPerJob: number;
    /** Median over rounds of service / graphile within the same round. */
    readonly pairedRatio: number;
    readonly samples: ClaimSample[];
  };
  readonly samples: Record<ClaimVariant, ClaimSample[]>;
  /**
   * PostgreSQL: the service with claim batching off (`QL_CLAIM_BATCH_MAX=1`, ADR 0027), sampled in the
   * same rounds; `pairedRatio` is the median of service / unbatched within a round.
   */
  readonly unbatched?: {
    readonly claimsPerSecond: number;
    readonly processCpuUsPerClaim: number;
    readonly pairedRatio: number;
    readonly samples: ClaimSample[];
  };
}

export const LEASE_MS = 24 * 60 * 60 * 1000;
const CAPACITY = 1024;
// The defaults the app runs with for what the claim reads (the preference hold: 5 s).
export const LEASE_TTL_CONFIG = {
  runLeaseMs: LEASE_MS,
  placementPreferenceHoldMs: 5000,
} as ControlPlaneConfig;

export interface BenchWorker {
  readonly workerId: string;
  readonly sessionId: string;
  readonly generation: number;
  readonly version: number;
}

/** One claim by one worker, per variant. */
export type ClaimOp = (w: BenchWorker) => Promise<unknown>;

interface Harness {
  readonly ops: Record<ClaimVariant, ClaimOp> & { readonly unbatched?: ClaimOp };
  close(): Promise<void>;
}

/** The peer beside one backlog's database: one sample at N, its queue put back to B after it (untimed). */
interface Peer {
  sample(n: number, claims: number, warmup: number): Promise<ClaimSample>;
  close(): Promise<void>;
}

export function serviceOp(
  db: SqlDatabase,
  ids: IdGenerator,
  config = LEASE_TTL_CONFIG,
  claimBatch: ClaimBatchOptions = DEFAULT_CLAIM_BATCH,
): ClaimOp {
  // The service as the app runs it, metrics included (their cost is part of the figure).
  const metrics = new ControlPlaneMetrics(new SqlOperationalStatsRepository(db));
  const service = new LeasesService(
    new SqlLeaseRepository(db, ids, claimBatch),
    new SqlWorkerSessionRepository(db, ids),
    config,
    metrics,
    new OfferWaiters(),
    // Its pulls are never held, and only a held pull asks again after the guard (ADR 0033).
    { check: async () => undefined },
    // Its workers are current ones (wire v2); the version is remembered after the first pull.
    {
      of: async () => 2 as const,
      software: async () => ({ softwareVersion: '0.1.0', wireVersion: 2 as const }),
    },
  );
  // Tokens are the worker's work, not the control plane's: made before the run, outside the figures.
  const tokens = Array.from({ length: 256 }, () => randomBytes(32).toString('base64url'));
  let next = 0;
  return async (w) => {
    const offer = await service.offers({ workerId: w.workerId } as WorkerPrincipal, w.sessionId, {
      generation: w.generation,
      expectedVersion: w.version,
      offerId: ids.uuidV7(),
      leaseToken: tokens[next++ & 255]!,
    });
    if (offer.status !== 'offered') throw new Error(`service pull went idle: ${offer.idle.reason}`);
  };
}

const DIGEST = 'f'.repeat(64);

/** The bare claim on SQLite: the same writes, hand-written, on its own connection to the same file. */
export function sqliteCeiling(path: string, ids: IdGenerator): { op: ClaimOp; close(): void } {
  const raw = new BetterSqlite3(path, { timeout: 25 });
  raw.pragma('journal_mode = WAL');
  raw.pragma('synchronous = NORMAL');
  const lockWorker = raw.prepare(`SELECT worker_id FROM workers WHERE worker_id = ?`);
  const pick = raw.prepare(
    `SELECT id FROM runs WHERE status = 'queued' ORDER BY priority DESC, queue_order, id LIMIT 1`,
  );
  const attempt = raw.prepare(
    `INSERT INTO attempts (id, run_id, attempt_no, status, version, worker_id, lease_generation, created_at,
       updated_at) VALUES (?, ?, 1, 'claimed', 0, ?, 1, ?, ?)`,
  );
  const lease = raw.prepare(
    `INSERT INTO run_leases (attempt_id, lease_generation, offer_id, run_id, worker_id, session_id,
       session_generation, version, token_digest, state, expires_at, claimed_at)
     VALUES (?, 1, ?, ?, ?, ?, 1, 0, ?, 'active', ?, ?)`,
  );
  const move = raw.prepare(
    `UPDATE runs SET status = 'dispatching', version = version + 1, event_seq = event_seq + 2,
       current_attempt_id = ?, attempt_count = 1, updated_at = ? WHERE id = ?`,
  );
  const events = raw.prepare(
    `INSERT INTO run_events (run_id, seq, type, attempt_id, at, detail)
     VALUES (?, 2, 'run.dispatching', ?, ?, NULL), (?, 3, 'attempt.claimed', ?, ?, '{}')`,
  );
  const claim = raw.transaction((w: BenchWorker) => {
    const now = Date.now();
    lockWorker.get(w.workerId);
    const run = pick.get() as { id: string } | undefined;
    if (!run) throw new Error('ceiling pull found no queued run');
    const attemptId = ids.uuidV7();
    attempt.run(attemptId, run.id, w.workerId, now, now);
    lease.run(attemptId, ids.uuidV7(), run.id, w.workerId, w.sessionId, DIGEST, now + LEASE_MS, now);
    move.run(attemptId, now, run.id);
    events.run(run.id, attemptId, now, run.id, attemptId, now);
  });
  return {
    op: async (w) => {
      // BEGIN IMMEDIATE, as the adapter does.
      claim.immediate(w);
    },
    close: () => raw.close(),
  };
}

const PG_CEILING = {
  lockWorker: 'SELECT worker_id FROM workers WHERE worker_id = $1 FOR UPDATE',
  pick: `SELECT id FROM runs WHERE status = 'queued' ORDER BY priority DESC, queue_order, id LIMIT 1
    FOR UPDATE SKIP LOCKED`,
  attempt: `INSERT INTO attempts (id, run_id, attempt_no, status, version, worker_id, lease_generation,
    created_at, updated_at) VALUES ($1, $2, 1, 'claimed', 0, $3, 1, clock_timestamp(), clock_timestamp())`,
  lease: `INSERT INTO run_leases (attempt_id, lease_generation, offer_id, run_id, worker_id, session_id,
    session_generation, version, token_digest, state, expires_at, claimed_at)
    VALUES ($1, 1, $2, $3, $4, $5, 1, 0, $6, 'active', clock_timestamp() + interval '1 day', clock_timestamp())`,
  move: `UPDATE runs SET status = 'dispatching', version = version + 1, event_seq = event_seq + 2,
    current_attempt_id = $1, attempt_count = 1, updated_at = clock_timestamp() WHERE id = $2`,
  events: `INSERT INTO run_events (run_id, seq, type, attempt_id, at, detail)
    VALUES ($1, 2, 'run.dispatching', $2, clock_timestamp(), NULL),
           ($1, 3, 'attempt.claimed', $2, clock_timestamp(), '{}')`,
} as const;

/** The bare claim on PostgreSQL: named prepared statements on a pool of the same size. */
export function postgresCeiling(pool: Pool, ids: IdGenerator): ClaimOp {
  const q = (client: PoolClient, name: keyof typeof PG_CEILING, values: unknown[]) =>
    client.query({ name: `ceiling_${name}`, text: PG_CEILING[name], values });
  return async (w) => {
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      await q(client, 'lockWorker', [w.workerId]);
      const { rows } = await q(client, 'pick', []);
      const runId = (rows[0] as { id: string } | undefined)?.id;
      if (!runId) throw new Error('ceiling pull found no queued run');
      const attemptId = ids.uuidV7();
      await q(client, 'attempt', [attemptId, runId, w.workerId]);
      await q(client, 'lease', [attemptId, ids.uuidV7(), runId, w.workerId, w.sessionId, DIGEST]);
      await q(client, 'move', [attemptId, runId]);
      await q(client, 'events', [runId, attemptId]);
      await client.query('COMMIT');
    } catch (error) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw error;
    } finally {
      client.release();
    }
  };
}

/** One task, `backlog` queued runs (bulk insert, ids in queue order), `workers` sessions of capacity 1024. */
export async function seed(db: SqlDatabase, ids: IdGenerator, backlog: number, workers: number) {
  const tasks = new SqlTaskRepository(db, ids);
  const taskId = ids.uuidV7();
  const spec = parseTaskSpec({ name: 'bench-noop', command: 'true', runtime: 'shell' });
  await tasks.create(taskId, spec, { actor: 'bench', action: 'task.create', target: taskId });
  const placement = JSON.stringify({
    preferred: [],
    required: {
      architectures: [],
      executors: ['local-process'],
      gpu: null,
      labels: {},
      minDiskMiB: 0,
      minMemoryMiB: 0,
      operatingSystems: [],
      runtimes: [],
    },
  });
  const batch = 500;
  for (let start = 0; start < backlog; start += batch) {
    const params: Record<string, string | number | boolean> = {
      taskId,
      digest: spec.digest,
      placement,
      no: false,
    };
    const rows: string[] = [];
    for (let i = start; i < Math.min(backlog, start + batch); i++) {
      params[`i${i - start}`] = ids.uuidV7();
      params[`q${i - start}`] = i;
      rows.push(
        `(:i${i - start}, :taskId, 1, :digest, :placement, 'queued', 0, 1, 0, :q${i - start}, 'manual', 0, :no, {now}, {now})`,
      );
    }
    await db.run(
      `INSERT INTO runs (id, task_id, revision, spec_digest, placement_json, status, version, event_seq, priority,
         queue_order, trigger_kind, attempt_count, cancel_requested, created_at, updated_at)
       VALUES ${rows.join(', ')}`,
      params,
    );
  }
  const sessions = new SqlWorkerSessionRepository(db, ids);
  const snapshot = benchSnapshot();
  const list: BenchWorker[] = [];
  for (let i = 0; i < workers; i++) {
    const workerId = `claim-w${i}`;
    const { session } = await sessions.register({
      workerId,
      sessionId: newSessionId(),
      snapshot: { ...snapshot, maxConcurrentRuns: CAPACITY, availableSlots: CAPACITY },
      leaseMs: LEASE_MS,
    });
    list.push({
      workerId,
      sessionId: session.sessionId,
      generation: session.generation,
      version: session.version,
    });
  }
  return list;
}

export async function settle(db: SqlDatabase): Promise<void> {
  if (db.dialect === 'sqlite') (db as SqliteDatabase).native.pragma('wal_checkpoint(TRUNCATE)');
}

const RESET_TABLES = ['runs', 'run_leases', 'attempts', 'run_events', 'workers'];

/**
 * Inside a reset's transaction: the runs a sample claimed (found through `attempts` by primary key, no
 * scan of the backlog) queued again, its attempts, leases and events deleted, every slot free.
 */
export async function requeueTouchedRuns(tx: SqlExecutor): Promise<void> {
  await tx.run(
    `UPDATE runs SET status = 'queued', version = 0, event_seq = 1, attempt_count = 0, current_attempt_id = NULL
     WHERE id IN (SELECT run_id FROM attempts)`,
  );
  await tx.run('DELETE FROM run_events');
  await tx.run('DELETE FROM run_leases');
  await tx.run('DELETE FROM attempts');
  await tx.run('UPDATE workers SET active_leases = 0 WHERE active_leases <> 0');
}

/**
 * Back to `backlog` queued runs and no leases: only rows a sample touched are rewritten, found
 * through `attempts` by primary key (no scan of the backlog). PostgreSQL then VACUUMs the tables so
 * no sample inherits another's dead rows: a plain VACUUM reads only the pages not all-visible (those
 * the sample and this reset dirtied); `analyze` (once, after seeding) also samples the statistics.
 */
export async function reset(db: SqlDatabase, analyze = false): Promise<void> {
  await db.transaction(requeueTouchedRuns);
  if (db.dialect === 'postgres') {
    for (const table of RESET_TABLES) await db.run(`VACUUM ${analyze ? '(ANALYZE) ' : ''}${table}`);
  } else {
    (db as SqliteDatabase).native.pragma('wal_checkpoint(TRUNCATE)');
  }
}

/**
 * N closed loops share a budget of `claims`; the sample is the time until the last one committed,
 * plus `settle` (SQLite: the WAL checkpoint the sample's writes make necessary, so that no variant
 * leaves its bill to the next one or hides it behind another connection's reader).
 */
export async function sample<W = BenchWorker>(
  op: (w: W) => Promise<unknown>,
  workers: readonly W[],
  claims: number,
  warmup: number,
  settle: () => Promise<void>,
) {
  let warm = 0;
  await Promise.all(
    workers.map(async (w) => {
      while (warm < warmup) {
        warm++;
        await op(w);
      }
    }),
  );
  let issued = 0;
  const cpuStart = process.cpuUsage();
  const start = performance.now();
  await Promise.all(
    workers.map(async (w) => {
      while (issued < claims) {
        issued++;
        await op(w);
      }
    }),
  );
  await settle();
  const seconds = (performance.now() - start) / 1000;
  const cpu = process.cpuUsage(cpuStart);
  return {
    claims,
    seconds,
    opsPerSecond: claims / seconds,
    processCpuUsPerOp: (cpu.user + cpu.system) / claims,
  };
}

type Slot = ClaimVariant | 'unbatched' | 'graphile';

async function runDialect(
  dialect: 'sqlite' | 'postgres',
  open: (poolSize: number) => Promise<{
    db: SqlDatabase;
    harness: (n: number) => Promise<Harness>;
    peer?: (backlog: number) => Promise<Peer>;
  }>,
  config: ClaimConfig,
): Promise<ClaimRow[]> {
  const rows: ClaimRow[] = [];
  const maxN = Math.max(...config.concurrencies);
  for (const backlog of config.backlogs) {
    const { db, harness, peer: openPeer } = await open(maxN);
    const ids = createIdGenerator();
    // One worker alone must be able to hold warm-up + sample (capacity 1024), and the backlog must last.
    const claims = Math.min(
      config.claimsPerSample(backlog),
      backlog - config.warmupClaims,
      CAPACITY - config.warmupClaims,
    );
    const t0 = performance.now();
    const workers = await seed(db, ids, backlog, maxN);
    await reset(db, true);
    config.log(`${dialect} B=${backlog}: seeded in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    const peer = config.peer && openPeer ? await openPeer(backlog) : undefined;
    const slots: Slot[] = [
      ...CLAIM_VARIANTS,
      ...(dialect === 'postgres' ? (['unbatched'] as const) : []),
      ...(peer ? (['graphile'] as const) : []),
    ];
    const samples = new Map<number, Record<Slot, ClaimSample[]>>();
    for (const n of config.concurrencies)
      samples.set(n, { ceiling: [], service: [], unbatched: [], graphile: [] });
    try {
      for (let round = 0; round < config.rounds; round++) {
        // Every variant takes every place in the order over the rounds (two variants: flipped).
        const order = slots.map((_, i) => slots[(i + round) % slots.length]!);
        for (const n of config.concurrencies) {
          const h = await harness(n);
          try {
            for (const variant of order) {
              let s: ClaimSample;
              if (variant === 'graphile') {
                s = await peer!.sample(n, claims, config.warmupClaims);
              } else {
                await reset(db);
                s = await sample(h.ops[variant]!, workers.slice(0, n), claims, config.warmupClaims, () =>
                  settle(db),
                );
              }
              samples.get(n)![variant].push(s);
              const unit = variant === 'graphile' ? 'jobs' : 'claims';
              config.log(
                `${dialect} B=${backlog} N=${n} round ${round + 1} ${variant}: ${s.opsPerSecond.toFixed(0)} ${unit}/s, ` +
                  `${s.processCpuUsPerOp.toFixed(0)} µs CPU/${unit.slice(0, -1)}`,
              );
            }
          } finally {
            await h.close();
          }
        }
      }
    } finally {
      await peer?.close();
    }
    for (const n of config.concurrencies) {
      const s = samples.get(n)!;
      const pairs = s.service.map((x, i) => x.opsPerSecond / s.ceiling[i]!.opsPerSecond);
      const row: ClaimRow = {
        dialect,
        backlog,
        concurrency: n,
        median: {
          ceiling: median(s.ceiling.map((x) => x.opsPerSecond)),
          service: median(s.service.map((x) => x.opsPerSecond)),
        },
        cpuUsPerOp: {
          ceiling: median(s.ceiling.map((x) => x.processCpuUsPerOp)),
          service: median(s.service.map((x) => x.processCpuUsPerOp)),
        },
        pairedRatio: median(pairs),
        ...(peer
          ? {
              peer: {
                jobsPerSecond: median(s.graphile.map((x) => x.opsPerSecond)),
                processCpuUsPerJob: median(s.graphile.map((x) => x.processCpuUsPerOp)),
                pairedRatio: median(s.service.map((x, i) => x.opsPerSecond / s.graphile[i]!.opsPerSecond)),
                samples: s.graphile,
              },
            }
          : {}),
        samples: { ceiling: s.ceiling, service: s.service },
        ...(s.unbatched.length
          ? {
              unbatched: {
                claimsPerSecond: median(s.unbatched.map((x) => x.opsPerSecond)),
                processCpuUsPerClaim: median(s.unbatched.map((x) => x.processCpuUsPerOp)),
                pairedRatio: median(s.service.map((x, i) => x.opsPerSecond / s.unbatched[i]!.opsPerSecond)),
                samples: s.unbatched,
              },
            }
          : {}),
      };
      rows.push(row);
    }
    await db.close();
  }
  return rows;
}

export async function benchClaimSqlite(dir: string, config: ClaimConfig): Promise<ClaimRow[]> {
  let counter = 0;
  return runDialect(
    'sqlite',
    async () => {
      const path = `${dir}/claim-${++counter}.sqlite`;
      const db = await SqliteDatabase.open({ path, cacheKiB: planeSqliteCacheKiB() }, systemClock);
      const ids = createIdGenerator();
      return {
        db,
        harness: async () => {
          const ceiling = sqliteCeiling(path, ids);
          return {
            ops: { ceiling: ceiling.op, service: serviceOp(db, ids) },
            close: async () => ceiling.close(),
          };
        },
      };
    },
    config,
  );
}

/** `freshUrl()` makes an empty database per backlog; graphile-worker's schema goes into it beside ours. */
export async function benchClaimPostgres(
  freshUrl: () => Promise<string>,
  config: ClaimConfig,
): Promise<ClaimRow[]> {
  return runDialect(
    'postgres',
    async () => {
      const url = await freshUrl();
      const admin = await PostgresDatabase.open({ url, poolSize: 2 }, true);
      const ids = createIdGenerator();
      return {
        db: admin,
        harness: async (n) => {
          // Same pool size for both variants: one connection per puller.
          const service = await PostgresDatabase.open({ url, poolSize: n }, false);
          const pool = new Pool({ connectionString: url, max: n });
          pool.on('error', () => undefined);
          return {
            ops: {
              ceiling: postgresCeiling(pool, ids),
              service: serviceOp(service, ids),
              unbatched: serviceOp(service, ids, LEASE_TTL_CONFIG, { ...DEFAULT_CLAIM_BATCH, maxSize: 1 }),
            },
            close: async () => {
              await service.close();
              await pool.end();
            },
          };
        },
        peer: async (backlog) => graphilePeer(await openGraphilePeer(url, { backlog, log: config.log })),
      };
    },
    config,
  );
}

function graphilePeer(queue: GraphilePeerQueue): Peer {
  return {
    sample: async (n, claims, warmup) => {
      const r = await queue.sample({ concurrency: n, measureJobs: claims, warmupJobs: warmup });
      return {
        claims: r.jobs,
        seconds: r.seconds,
        opsPerSecond: r.jobsPerSecond,
        processCpuUsPerOp: r.processCpuUsPerJob,
      };
    },
    close: () => queue.close(),
  };
}
