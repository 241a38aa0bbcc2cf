/**
 * Peer benchmark: graphile-worker (0.16.x) processing no-op jobs on the same PostgreSQL server as our
 * own benchmarks, so that its throughput can be printed beside ours. Not a closed loop of ours:
 * graphile's runner drives itself (`concurrency` workers, each `get_job` → task → `complete_job`,
 * immediately again while jobs are available); we only count the completions it reports.
 *
 * What is counted: a job is complete when graphile emits `job:complete` with no error, which it does
 * after `complete_job` has returned, i.e. after the job row was deleted. The window starts at the
 * `warmupJobs`-th completion and ends at the `warmupJobs + measureJobs`-th.
 */
import { EventEmitter } from 'node:events';
import { performance } from 'node:perf_hooks';
import { Pool } from 'pg';
import { Logger, Runner, WorkerEvents, run, runMigrations } from 'graphile-worker';
import { perPidDelta } from './lib/proc-cpu';

export interface GraphilePeerResult {
  readonly concurrency: number;
  readonly backlog: number;
  /** Jobs completed inside the counted window (= `measureJobs`). */
  readonly jobs: number;
  readonly seconds: number;
  readonly jobsPerSecond: number;
  /**
   * CPU time of this Node process (user + system) per job over the counted window only: graphile's
   * runner, its task dispatch and the `pg` driver (warm-up, migrations and connecting excluded).
   */
  readonly processCpuUsPerJob: number;
  /** `cpuProbe`'s ms (e.g. the PostgreSQL server's CPU) per job over the same window; absent without one. */
  readonly probeCpuMsPerJob?: number;
  /** CPU ms per job of the database's own backends over the same window (`backendsProbe`). */
  readonly backendsCpuMsPerJob?: number;
}

export interface GraphilePeerOptions {
  readonly concurrency: number;
  /** No-op jobs enqueued before the runner starts; must be >= warmupJobs + measureJobs. */
  readonly backlog: number;
  readonly measureJobs: number;
  readonly warmupJobs: number;
  readonly log?: (line: string) => void;
  /** Cumulative CPU ms of something outside this process, read when the counted window opens and closes. */
  readonly cpuProbe?: () => number;
  /** Own CPU ms by pid of the backends of graphile's database, read when the window opens and closes. */
  readonly backendsProbe?: (database: string) => Promise<Map<number, number>>;
}

/** graphile-worker's default schema; its migrations create it, `measureGraphilePeer` drops it. */
const SCHEMA = 'graphile_worker';
const TASK = 'bench_noop';
/** How long without a single completion before the run is declared stuck. */
const STALL_MS = 30_000;

/**
 * Creates a fresh schema in the database at `url` (graphile_worker's own migrations), enqueues
 * `backlog` no-op jobs in one `graphile_worker.add_jobs` call, then runs a graphile-worker `run()`
 * with the given concurrency and measures how long it takes to complete `measureJobs` jobs after a
 * warm-up of `warmupJobs` jobs. Stops the runner cleanly and drops the graphile_worker schema.
 *
 * Refuses to run if the database already has a `graphile_worker` schema (it would be dropped).
 * While it runs, `NO_LOG_SUCCESS=1` is set (as graphile's own perf test does) so graphile does not
 * format a log line per job that the quiet logger would drop anyway; the previous value is restored.
 */
export async function measureGraphilePeer(
  url: string,
  opts: GraphilePeerOptions,
): Promise<GraphilePeerResult> {
  const { concurrency, backlog, measureJobs, warmupJobs } = opts;
  const log = opts.log ?? (() => undefined);
  for (const [name, value, min] of [
    ['concurrency', concurrency, 1],
    ['backlog', backlog, 1],
    ['measureJobs', measureJobs, 1],
    ['warmupJobs', warmupJobs, 0],
  ] as const) {
    if (!Number.isInteger(value) || value < min)
      throw new Error(`${name} must be an integer >= ${min}, got ${value}`);
  }
  if (backlog < warmupJobs + measureJobs)
    throw new Error(`backlog (${backlog}) must be >= warmupJobs + measureJobs (${warmupJobs + measureJobs})`);

  // Each worker holds a pool client only while it calls get_job or complete_job, but the worker pool
  // also keeps one client checked out for good, for LISTEN "jobs:insert". So `concurrency` workers
  // can all be in the database at once only with concurrency + 1 clients (graphile merely warns when
  // max < concurrency). Never below pg's default of 10, which is graphile's default maxPoolSize.
  // Our own pool (rather than `connectionString` + `maxPoolSize`, which builds the same pg.Pool) so
  // that its end can be awaited: graphile ends a pool it created without waiting for it.
  const poolSize = Math.max(concurrency + 1, 10);
  const pgPool = new Pool({ connectionString: url, max: poolSize });
  pgPool.on('error', () => undefined); // graphile adds its own handler; this one only covers our own use
  const connections = trackConnections(pgPool);

  const logger = quietLogger(log);
  const previousNoLogSuccess = process.env.NO_LOG_SUCCESS;
  process.env.NO_LOG_SUCCESS = '1';
  let runner: Runner | undefined;
  let schemaCreated = false;
  try {
    const { rows: existing } = await pgPool.query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [SCHEMA]);
    if (existing.length > 0)
      throw new Error(`the database already has a ${SCHEMA} schema; measureGraphilePeer needs a fresh one`);
    schemaCreated = true; // from here on the schema is ours to drop, even if the migrations fail half-way
    let t = performance.now();
    await runMigrations({ pgPool, logger });
    log(`graphile-worker: migrations ${(performance.now() - t).toFixed(0)} ms`);

    t = performance.now();
    const { rows } = await pgPool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM ${SCHEMA}.add_jobs(ARRAY(
         SELECT ROW($1::text, NULL, NULL, NULL, NULL, NULL, NULL, NULL)::${SCHEMA}.job_spec
         FROM generate_series(1, $2::int)))`,
      [TASK, backlog],
    );
    if (rows[0]?.n !== backlog) throw new Error(`add_jobs enqueued ${rows[0]?.n} jobs, expected ${backlog}`);
    log(
      `graphile-worker: enqueued ${backlog} jobs in ${(performance.now() - t).toFixed(0)} ms (one add_jobs call)`,
    );

    const events: WorkerEvents = new EventEmitter();
    const target = warmupJobs + measureJobs;
    let completed = 0;
    let lastProgress = performance.now();
    let windowStart = warmupJobs === 0 ? performance.now() : Number.NaN;
    let cpuStart = warmupJobs === 0 ? process.cpuUsage() : undefined;
    const probe = opts.cpuProbe;
    let probeStart = warmupJobs === 0 && probe ? probe() : Number.NaN;
    const database = decodeURIComponent(new URL(url).pathname.slice(1));
    const backends = opts.backendsProbe;
    let backendsStart = warmupJobs === 0 && backends ? backends(database) : undefined;
    let watchdog: NodeJS.Timeout | undefined;
    const measured = new Promise<{ seconds: number; cpuUs: number; probeMs: number; backendsMs: number }>(
      (resolve, reject) => {
        events.on('job:complete', ({ error }) => {
          if (error) return; // reported by job:error below
          completed++;
          lastProgress = performance.now();
          if (completed === warmupJobs) {
            windowStart = performance.now();
            cpuStart = process.cpuUsage();
            if (probe) probeStart = probe();
            if (backends) backendsStart = backends(database);
          } else if (completed === target) {
            const seconds = (performance.now() - windowStart) / 1000;
            const cpu = process.cpuUsage(cpuStart);
            const probeMs = probe ? probe() - probeStart : Number.NaN;
            if (!backends || !backendsStart)
              return resolve({ seconds, cpuUs: cpu.user + cpu.system, probeMs, backendsMs: Number.NaN });
            Promise.all([backendsStart, backends(database)]).then(
              ([before, after]) =>
                resolve({
                  seconds,
                  cpuUs: cpu.user + cpu.system,
                  probeMs,
                  backendsMs: perPidDelta(before, after),
                }),
              reject,
            );
          }
        });
        events.on('job:error', ({ job, error }) =>
          reject(new Error(`graphile job ${job.id} failed: ${(error as Error)?.message ?? String(error)}`)),
        );
        events.on('worker:fatalError', ({ error }) =>
          reject(new Error(`graphile worker died: ${(error as Error)?.message ?? String(error)}`)),
        );
        watchdog = setInterval(() => {
          if (performance.now() - lastProgress > STALL_MS)
            reject(new Error(`graphile-worker stalled: ${completed} of ${target} jobs completed`));
        }, 1_000);
      },
    );

    try {
      runner = await run({
        pgPool,
        logger,
        events,
        concurrency,
        noHandleSignals: true,
        pollInterval: 50,
        taskList: { [TASK]: async () => undefined },
        parsedCronItems: [], // no crontab: don't look for ./crontab
      });
      // If the runner ends on its own before the window closes, that is a failure, not a result.
      const ended = runner.promise.then(() => {
        if (completed < target)
          throw new Error(`graphile-worker stopped after ${completed} of ${target} jobs`);
        return measured;
      });
      ended.catch(() => undefined); // a rejection after the race is settled is reported by stop() below
      const { seconds, cpuUs, probeMs, backendsMs } = await Promise.race([measured, ended]);
      return {
        concurrency,
        backlog,
        jobs: measureJobs,
        seconds,
        jobsPerSecond: measureJobs / seconds,
        processCpuUsPerJob: cpuUs / measureJobs,
        ...(probe ? { probeCpuMsPerJob: probeMs / measureJobs } : {}),
        ...(backends ? { backendsCpuMsPerJob: backendsMs / measureJobs } : {}),
      };
    } finally {
      clearInterval(watchdog);
      measured.catch(() => undefined);
    }
  } finally {
    // Graceful: lets the jobs in flight finish, then releases every worker and the LISTEN client.
    if (runner)
      await runner.stop().catch((error: Error) => log(`graphile-worker: stop failed: ${error.message}`));
    if (previousNoLogSuccess === undefined) delete process.env.NO_LOG_SUCCESS;
    else process.env.NO_LOG_SUCCESS = previousNoLogSuccess;
    try {
      if (schemaCreated) await pgPool.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
    } finally {
      await pgPool.end();
      await connections.closed();
    }
  }
}

/** Drops debug and info; warnings and errors go to `log` (graphile otherwise prints to the console). */
function quietLogger(log: (line: string) => void): Logger {
  return new Logger((scope) => (level, message) => {
    const l = String(level);
    if (l === 'debug' || l === 'info') return;
    const where = scope.label ? `${scope.label}${scope.workerId ? ` ${scope.workerId}` : ''}: ` : '';
    log(`graphile-worker ${l}: ${where}${message}`);
  });
}

/**
 * `pool.end()` resolves as soon as it has asked every client to end, before their connections are
 * closed: a `DROP DATABASE … WITH (FORCE)` right after it would find their backends still alive (and
 * graphile's client error handlers would log each one). `closed()` waits for the last `remove`.
 */
function trackConnections(pool: Pool): { closed(): Promise<void> } {
  let open = 0;
  pool.on('connect', () => open++);
  pool.on('remove', () => open--);
  return {
    closed: () =>
      new Promise<void>((resolve) => {
        if (open <= 0) return resolve();
        const timer = setTimeout(resolve, 5_000); // don't hang the bench on a client that never ends
        pool.on('remove', () => {
          if (open > 0) return;
          clearTimeout(timer);
          resolve();
        });
      }),
  };
}
