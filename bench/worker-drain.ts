/**
 * End-to-end runs/s with real worker processes (the worker's own run loop): `k` processes of
 * `dist/apps/worker/src/main.js` under the launchers' V8 flags drain a backlog of no-op runs queued
 * through the admin API. The rate is read from the database the control plane wrote: between the
 * warm-up's last committed completion and the last one (`finished_at`, database time).
 */
import Database from 'better-sqlite3';
import { Client } from 'pg';
import { WORKER_NODE_FLAGS } from '../apps/worker/src/node-flags';
import { BenchDatabase, BenchPki, PlaneProcess, WORKER_MAIN } from './lib/plane';
import { BenchProcess, pollUntil, spawnNode } from './lib/processes';
import { CpuReading, cpuPerRun, perPidDelta, processTreeCpuMs, readCpu } from './lib/proc-cpu';

/** Terminal runs of one task by status, and their finish times in ms, in order. */
type FinishedRuns = { readonly statuses: Record<string, number>; readonly finishedMs: number[] };

/** A read-only view of the plane's `runs` table, as an operator would query it. */
async function runsReader(db: BenchDatabase): Promise<{
  finished(taskId: string): Promise<FinishedRuns>;
  close(): Promise<void>;
}> {
  const sql =
    "SELECT status, finished_at AS f FROM runs WHERE task_id = $1 AND status NOT IN ('queued', 'dispatching', 'running', 'retry_wait') ORDER BY finished_at";
  const collect = (rows: { status: string; f: number | string }[]): FinishedRuns => {
    const statuses: Record<string, number> = {};
    for (const r of rows) statuses[r.status] = (statuses[r.status] ?? 0) + 1;
    return { statuses, finishedMs: rows.filter((r) => r.status === 'succeeded').map((r) => Number(r.f)) };
  };
  if (db.dialect === 'sqlite') {
    const file = new Database(db.url.slice('sqlite:'.length), { readonly: true, fileMustExist: true });
    const statement = file.prepare<[string], { status: string; f: number }>(sql.replace('$1', '?'));
    return {
      finished: async (taskId) => collect(statement.all(taskId)),
      close: async () => void file.close(),
    };
  }
  const client = new Client({ connectionString: db.url });
  await client.connect();
  const pgSql = sql.replace('finished_at AS f', '(extract(epoch FROM finished_at) * 1000)::float8 AS f');
  return {
    finished: async (taskId) =>
      collect((await client.query<{ status: string; f: number }>(pgSql, [taskId])).rows),
    close: () => client.end(),
  };
}

export interface WorkerDrainSample {
  readonly workers: number;
  readonly runs: number;
  readonly seconds: number;
  readonly runsPerSecond: number;
  /**
   * CPU ms per run by component, from the moment every worker had registered and the warm-up had
   * finished to the last run: the given components (control plane, PostgreSQL), `worker` (the worker
   * processes' own CPU) and `noop` (their children: the reaped no-ops and the live reaper `sh`).
   */
  readonly cpuMsPerRun?: CpuReading;
  /** Runs finished between the two CPU readings (what `cpuMsPerRun` divides by). */
  readonly cpuRuns?: number;
}

/**
 * Queues `warmup + runs` no-op runs of a new task, then starts `ids.length` worker processes and
 * waits until every run is terminal; all must have succeeded. Timed by the database: from the
 * `warmup`-th completion to the last.
 */
export async function workerProcessDrain(
  plane: PlaneProcess,
  pki: BenchPki,
  db: BenchDatabase,
  ids: readonly string[],
  runs: number,
  warmup: number,
  queue: (taskName: string, n: number) => Promise<string>,
  workerEnv: Record<string, string> = {},
  cpuComponents: Record<string, () => number> = {},
  backends?: () => Promise<Map<number, number>>,
): Promise<WorkerDrainSample> {
  const taskId = await queue(`bench workers ${ids.length}`, warmup + runs);
  const reader = await runsReader(db);
  const workers: BenchProcess[] = [];
  try {
    for (const id of ids) {
      workers.push(
        spawnNode([...WORKER_NODE_FLAGS, WORKER_MAIN], {
          ...pki.workerEnv(id, plane.ready.ingressUrl),
          // Throughput, not patience, is measured: a register slowed by a busy shared machine must not end the level.
          QL_WORKER_REQUEST_TIMEOUT_MS: '30000',
          QL_WORKER_STOP_BUDGET_MS: '40000',
          ...workerEnv,
        }),
      );
    }
    const components = {
      ...cpuComponents,
      worker: () => workers.reduce((sum, w) => sum + processTreeCpuMs(w.pid).own, 0),
      noop: () => workers.reduce((sum, w) => sum + processTreeCpuMs(w.pid).children, 0),
    };
    let cpuStart:
      { reading: CpuReading; terminal: number; backends: Map<number, number> | undefined } | undefined;
    const registered = () => workers.every((w) => w.lines.some((l) => l.msg === 'worker registered'));
    const done = await pollUntil(
      `${warmup + runs} runs finished by ${ids.length} workers`,
      async () => {
        for (const w of workers) {
          if (w.child.exitCode !== null) {
            const last = w.output
              .filter((l) => l.trim())
              .at(-1)
              ?.trim();
            throw new Error(`a worker exited ${w.child.exitCode}: ${last}\n${w.output.join('\n')}`);
          }
        }
        const now = await reader.finished(taskId);
        const terminal = Object.values(now.statuses).reduce((a, b) => a + b, 0);
        if (terminal >= warmup + runs)
          return { ...now, cpuEnd: readCpu(components), backendsEnd: await backends?.(), terminal };
        if (!cpuStart && terminal >= warmup && registered())
          cpuStart = { reading: readCpu(components), backends: await backends?.(), terminal };
        return undefined;
      },
      600_000,
      100,
    );
    if (done.finishedMs.length !== warmup + runs) {
      throw new Error(`not every run succeeded: ${JSON.stringify(done.statuses)}`);
    }
    const seconds = (done.finishedMs.at(-1)! - done.finishedMs[warmup - 1]!) / 1000;
    const cpuRuns = cpuStart ? done.terminal - cpuStart.terminal : 0;
    return {
      workers: ids.length,
      runs,
      seconds,
      runsPerSecond: runs / seconds,
      ...(cpuStart && cpuRuns > 0
        ? {
            cpuMsPerRun: {
              ...cpuPerRun(cpuStart.reading, done.cpuEnd, cpuRuns),
              ...(cpuStart.backends && done.backendsEnd
                ? { postgresDb: perPidDelta(cpuStart.backends, done.backendsEnd) / cpuRuns }
                : {}),
            },
            cpuRuns,
          }
        : {}),
    };
  } finally {
    await Promise.all(workers.map((w) => w.stop()));
    await reader.close();
  }
}
