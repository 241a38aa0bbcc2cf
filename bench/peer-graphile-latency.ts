/**
 * graphile-worker's latency at idle: one runner at concurrency 1 waits on an empty queue (its LISTEN
 * on `jobs:insert` wakes it; the poll interval is graphile's default, 2 s), and one job at a time is
 * added after an idle pause. Latency = from just before `graphile_worker.add_job` is sent to the
 * runner's `job:complete` for that job (after `complete_job` has returned), both read in this process.
 */
import { EventEmitter } from 'node:events';
import { performance } from 'node:perf_hooks';
import { Pool } from 'pg';
import { Runner, WorkerEvents, run, runMigrations } from 'graphile-worker';
import { SCHEMA, TASK, quietLogger, trackConnections } from './peer-graphile';

export interface GraphileLatencyOptions {
  /** Jobs timed, after `warmup` untimed ones. */
  readonly samples: number;
  readonly warmup: number;
  /** Idle pause before each job: uniform in [pauseMs, 2 × pauseMs). */
  readonly pauseMs: number;
  /** What each job does; by default nothing. */
  readonly task?: () => Promise<void>;
  readonly log?: (line: string) => void;
}

const JOB_TIMEOUT_MS = 30_000;

/**
 * Installs graphile-worker's schema in the database at `url` (refusing one that has it), times
 * `samples` jobs one at a time, and drops the schema. Answers the latencies in ms, in order.
 */
export async function measureGraphileLatency(url: string, opts: GraphileLatencyOptions): Promise<number[]> {
  const logger = quietLogger(opts.log ?? (() => undefined));
  const pgPool = new Pool({ connectionString: url, max: 10 });
  pgPool.on('error', () => undefined);
  const connections = trackConnections(pgPool);
  const events: WorkerEvents = new EventEmitter();
  const done = new Map<string, number>();
  const waiting = new Map<string, (at: number) => void>();
  let failure: Error | undefined;
  events.on('job:complete', ({ job, error }) => {
    const at = performance.now();
    if (error) failure = new Error(`graphile job ${job.id} failed: ${String(error)}`);
    const waiter = waiting.get(job.id);
    if (waiter) waiter(at);
    else done.set(job.id, at);
  });
  const completion = (id: string) =>
    new Promise<number>((resolve, reject) => {
      const known = done.get(id);
      if (known !== undefined) return resolve(known);
      const timer = setTimeout(
        () => reject(failure ?? new Error(`graphile job ${id}: no completion in ${JOB_TIMEOUT_MS} ms`)),
        JOB_TIMEOUT_MS,
      );
      waiting.set(id, (at) => {
        clearTimeout(timer);
        resolve(at);
      });
    });
  let schemaCreated = false;
  let runner: Runner | undefined;
  const previousNoLogSuccess = process.env.NO_LOG_SUCCESS;
  process.env.NO_LOG_SUCCESS = '1';
  try {
    const { rows } = await pgPool.query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [SCHEMA]);
    if (rows.length > 0) throw new Error(`the database already has a ${SCHEMA} schema`);
    schemaCreated = true;
    await runMigrations({ pgPool, logger });
    runner = await run({
      pgPool,
      logger,
      events,
      concurrency: 1,
      noHandleSignals: true,
      taskList: { [TASK]: opts.task ?? (async () => undefined) },
      parsedCronItems: [],
    });
    const latencies: number[] = [];
    for (let i = 0; i < opts.warmup + opts.samples; i++) {
      await new Promise((resolve) => setTimeout(resolve, opts.pauseMs * (1 + Math.random())));
      const sent = performance.now();
      const added = await pgPool.query<{ id: string }>(`SELECT (${SCHEMA}.add_job($1)).id::text AS id`, [
        TASK,
      ]);
      const at = await completion(added.rows[0]!.id);
      if (failure) throw failure;
      if (i >= opts.warmup) latencies.push(at - sent);
    }
    return latencies;
  } finally {
    if (runner) await runner.stop().catch((error: Error) => logger.error(`stop failed: ${error.message}`));
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
