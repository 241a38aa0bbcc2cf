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
import { CpuReading, perPidDelta, readCpu } from './lib/proc-cpu';

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
  /** Each of `probes`' ms per job over the same window. */
  readonly probesCpuMsPerJob?: Record<string, number>;
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
  /** More cumulative CPU ms readers, by name, read with `cpuProbe` (e.g. this process's children). */
  readonly probes?: Readonly<Record<string, () => number>>;
  /** What each job does; by default nothing (the no-op peer). */
  readonly task?: () => Promise<void>;
}

/** graphile-worker's default schema; its migrations create it, `measureGraphilePeer` drops it. */
export const SCHEMA = 'graphile_worker';
/** The one task identifier the peer's jobs name. */
export const TASK = 'bench_noop';
/** How long without a single completion before the run is declared stuck. */
const STALL_MS = 30_000;

/**
 * Creates a fresh schema in the database at `url` (graphile_worker's own migrations), enqueues
 * `backlog` no-op jobs in one `graphile_worker.add_jobs` call, then runs a graphile-worker `run()`
 * with the given concurrency and measures how long it takes to complete `measureJobs` jobs after a
 * warm-up of `warmupJobs` jobs. Stops the runner cleanly and drops the graphile_worker schema.
 * `openGraphilePeer` + one `sample` + `close`; kept for callers that want one figure per schema.
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
  checkInts({ concurrency, measureJobs, warmupJobs });
  if (backlog < warmupJobs + measureJobs)
    throw new Error(`backlog (${backlog}) must be >= warmupJobs + measureJobs (${warmupJobs + measureJobs})`);
  const queue = await openGraphilePeer(url, { backlog, log: opts.log });
  try {
    return await queue.sample({
      concurrency,
      measureJobs,
      warmupJobs,
      cpuProbe: opts.cpuProbe,
      backendsProbe: opts.backendsProbe,
      probes: opts.probes,
      task: opts.task,
    });
  } finally {
    await queue.close();
  }
}

export interface GraphilePeerQueueOptions {
  /** No-op jobs enqueued once, and topped back up to after every sample. */
  readonly backlog: number;
  readonly log?: (line: string) => void;
  /**
   * Connections of the pool used for the schema, the enqueueing and the top-ups (default 2). Each
   * sample opens its own pool sized for its concurrency.
   */
  readonly connections?: number;
}

export type GraphilePeerSampleOptions = Pick<
  GraphilePeerOptions,
  'concurrency' | 'measureJobs' | 'warmupJobs' | 'cpuProbe' | 'backendsProbe' | 'probes' | 'task'
>;

/** A graphile-worker schema holding `backlog` no-op jobs, sampled again and again at any concurrency. */
export interface GraphilePeerQueue {
  readonly backlog: number;
  /**
   * One `run()` at `concurrency` from a queue of `backlog` jobs: the counted window is the
   * `warmupJobs + 1`-th to the `warmupJobs + measureJobs`-th completion. After the runner has stopped,
   * the queue is put back to `backlog` jobs (the completed count re-added in one `add_jobs` call, then
   * a plain `VACUUM` of the jobs table, which reads only the pages the sample dirtied): neither is timed.
   */
  sample(opts: GraphilePeerSampleOptions): Promise<GraphilePeerResult>;
  /** Drops the schema and ends the pool. */
  close(): Promise<void>;
}

/**
 * Installs graphile-worker's schema in the database at `url` (its own migrations), enqueues
 * `backlog` no-op jobs in one `graphile_worker.add_jobs` call and `VACUUM (ANALYZE)`s the jobs table,
 * so autovacuum finds nothing to do on it during a sample. Refuses a database that already has a
 * `graphile_worker` schema (`close` drops it).
 */
export async function openGraphilePeer(
  url: string,
  opts: GraphilePeerQueueOptions,
): Promise<GraphilePeerQueue> {
  const { backlog } = opts;
  const log = opts.log ?? (() => undefined);
  checkInts({ backlog });
  const pgPool = new Pool({ connectionString: url, max: opts.connections ?? 2 });
  pgPool.on('error', () => undefined);
  const connections = trackConnections(pgPool);
  const logger = quietLogger(log);
  let schemaCreated = false;
  const close = async () => {
    try {
      if (schemaCreated) await pgPool.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
    } finally {
      await pgPool.end();
      await connections.closed();
    }
  };
  try {
    const { rows: existing } = await pgPool.query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [SCHEMA]);
    if (existing.length > 0)
      throw new Error(`the database already has a ${SCHEMA} schema; measureGraphilePeer needs a fresh one`);
    schemaCreated = true; // from here on the schema is ours to drop, even if the migrations fail half-way
    let t = performance.now();
    await runMigrations({ pgPool, logger });
    log(`graphile-worker: migrations ${(performance.now() - t).toFixed(0)} ms`);
    t = performance.now();
    await enqueue(pgPool, backlog);
    await pgPool.query(`VACUUM (ANALYZE) ${SCHEMA}._private_jobs`);
    log(
      `graphile-worker: enqueued ${backlog} jobs in ${(performance.now() - t).toFixed(0)} ms (one add_jobs call, then VACUUM ANALYZE)`,
    );
  } catch (error) {
    await close();
    throw error;
  }
  return {
    backlog,
    sample: async (sampleOpts) => {
      const { concurrency, measureJobs, warmupJobs } = sampleOpts;
      checkInts({ concurrency, measureJobs, warmupJobs });
      if (backlog < warmupJobs + measureJobs)
        throw new Error(
          `backlog (${backlog}) must be >= warmupJobs + measureJobs (${warmupJobs + measureJobs})`,
        );
      const { result, completed } = await runSample(url, logger, { ...sampleOpts, backlog });
      // Back to `backlog` queued jobs: graphile deleted each completed one (and nothing else).
      await enqueue(pgPool, completed);
      await pgPool.query(`VACUUM ${SCHEMA}._private_jobs`);
      return result;
    },
    close,
  };
}

function checkInts(values: Record<string, number>): void {
  for (const [name, value] of Object.entries(values)) {
    const min = name === 'warmupJobs' ? 0 : 1;
    if (!Number.isInteger(value) || value < min)
      throw new Error(`${name} must be an integer >= ${min}, got ${value}`);
  }
}

async function enqueue(pgPool: Pool, jobs: number): Promise<void> {
  if (jobs === 0) return;
  const { rows } = await pgPool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM ${SCHEMA}.add_jobs(ARRAY(
       SELECT ROW($1::text, NULL, NULL, NULL, NULL, NULL, NULL, NULL)::${SCHEMA}.job_spec
       FROM generate_series(1, $2::int)))`,
    [TASK, jobs],
  );
  if (rows[0]?.n !== jobs) throw new Error(`add_jobs enqueued ${rows[0]?.n} jobs, expected ${jobs}`);
}

/** One runner on its own pool; `completed`: every job it completed, the ones after the window too. */
async function runSample(
  url: string,
  logger: Logger,
  opts: GraphilePeerOptions,
): Promise<{ result: GraphilePeerResult; completed: number }> {
  const { concurrency, backlog, measureJobs, warmupJobs } = opts;
  // Each worker holds a pool client only while it calls get_job or complete_job, but the worker pool
  // also keeps one client checked out for good, for LISTEN "jobs:insert". So `concurrency` workers
  // can all be in the database at once only with concurrency + 1 clients (graphile merely warns when
  // max < concurrency). Never below pg's default of 10, which is graphile's default maxPoolSize.
  // Our own pool (rather than `connectionString` + `maxPoolSize`, which builds the same pg.Pool) so
  // that its end can be awaited: graphile ends a pool it created without waiting for it.
  const pgPool = new Pool({ connectionString: url, max: Math.max(concurrency + 1, 10) });
  pgPool.on('error', () => undefined); // graphile adds its own handler; this one only covers our own use
  const connections = trackConnections(pgPool);
  const previousNoLogSuccess = process.env.NO_LOG_SUCCESS;
  process.env.NO_LOG_SUCCESS = '1';
  let runner: Runner | undefined;
  const events: WorkerEvents = new EventEmitter();
  const target = warmupJobs + measureJobs;
  let completed = 0;
  try {
    let lastProgress = performance.now();
    let windowStart = warmupJobs === 0 ? performance.now() : Number.NaN;
    let cpuStart = warmupJobs === 0 ? process.cpuUsage() : undefined;
    const probe = opts.cpuProbe;
    let probeStart = warmupJobs === 0 && probe ? probe() : Number.NaN;
    const probes = opts.probes ?? {};
    let probesStart = warmupJobs === 0 ? readCpu(probes) : {};
    let probesMs: CpuReading = {};
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
            probesStart = readCpu(probes);
            if (backends) backendsStart = backends(database);
          } else if (completed === target) {
            const seconds = (performance.now() - windowStart) / 1000;
            const cpu = process.cpuUsage(cpuStart);
            const probeMs = probe ? probe() - probeStart : Number.NaN;
            const probesEnd = readCpu(probes);
            probesMs = Object.fromEntries(
              Object.keys(probes).map((name) => [
                name,
                (probesEnd[name]! - probesStart[name]!) / measureJobs,
              ]),
            );
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
        taskList: { [TASK]: opts.task ?? (async () => undefined) },
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
      const result = {
        concurrency,
        backlog,
        jobs: measureJobs,
        seconds,
        jobsPerSecond: measureJobs / seconds,
        processCpuUsPerJob: cpuUs / measureJobs,
        ...(probe ? { probeCpuMsPerJob: probeMs / measureJobs } : {}),
        ...(backends ? { backendsCpuMsPerJob: backendsMs / measureJobs } : {}),
        ...(opts.probes ? { probesCpuMsPerJob: probesMs } : {}),
      };
      // Graceful: lets the jobs in flight finish (counted), then releases every worker and the LISTEN client.
      const stopping = runner;
      runner = undefined;
      await stopping.stop();
      return { result, completed };
    } finally {
      clearInterval(watchdog);
      measured.catch(() => undefined);
    }
  } finally {
    if (runner)
      await runner
        .stop()
        .catch((error: Error) => logger.error(`graphile-worker: stop failed: ${error.message}`));
    if (previousNoLogSuccess === undefined) delete process.env.NO_LOG_SUCCESS;
    else process.env.NO_LOG_SUCCESS = previousNoLogSuccess;
    await pgPool.end();
    await connections.closed();
  }
}

/** Drops debug and info; warnings and errors go to `log` (graphile otherwise prints to the console). */
export function quietLogger(log: (line: string) => void): Logger {
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
export function trackConnections(pool: Pool): { closed(): Promise<void> } {
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
