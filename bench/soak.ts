/**
 * The `soak` group's measurement (issue 17, idea 5): does the control plane's memory stay flat under
 * a long steady load? A control plane in its own process (`cluster-control` on PostgreSQL as shipped,
 * or `standalone` on SQLite), W real worker processes × S slots, and runs triggered through the admin
 * API (a fresh `Idempotency-Key` each, as the README does) at a steady rate: by default half of the
 * maximum measured just before, by the same workers, on the same plane. Every `sampleSeconds` the
 * plane's RSS (and its anonymous part) is read from /proc and its V8 heap from its own `/metrics`
 * (prom-client's default series); the runs done and the backlog from the database. bench/soak-main.ts
 * fits the slope and writes the results.
 */
import { randomUUID } from 'node:crypto';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import Database from 'better-sqlite3';
import { Client } from 'pg';
import { WORKER_NODE_FLAGS } from '../apps/worker/src/node-flags';
import { CONTROL_PLANE_NODE_FLAGS } from '../apps/control-plane/src/node-flags';
import type { SqlitePragmas } from '../libs/persistence/src/sqlite/sqlite-database';
import { envNumber } from './lib/measure';
import {
  BenchDatabase,
  Dialect,
  PlaneProcess,
  WORKER_MAIN,
  createBenchPki,
  createPlaneDatabase,
  startPlaneProcess,
} from './lib/plane';
import { BenchProcess, pollUntil, rssMiB, spawnNode } from './lib/processes';
import { Level, levelName, parseLevels } from './peer';

export interface SoakConfig {
  readonly dialect: Dialect;
  readonly minutes: number;
  /** Samples taken before this are left out of the slope (start-up, caches and heaps filling). */
  readonly settleMinutes: number;
  readonly sampleSeconds: number;
  readonly level: Level;
  /** Runs per second to trigger; undefined: `rateShare` × the maximum measured first. */
  readonly rate: number | undefined;
  readonly rateShare: number;
  /** Runs the maximum is measured with (after as many again as a warm-up). */
  readonly probeRuns: number;
  /** A folder: the plane and the workers run with `--heapsnapshot-signal=SIGUSR2` and each writes a snapshot there after the settle and at the end. */
  readonly heapSnapshotDir: string | undefined;
  readonly pgUrl: string;
}

export function soakConfig(env: NodeJS.ProcessEnv = process.env): SoakConfig {
  const dialect = env.QL_BENCH_SOAK_DIALECT || 'postgres';
  if (dialect !== 'postgres' && dialect !== 'sqlite')
    throw new Error(`QL_BENCH_SOAK_DIALECT: "${dialect}" is not postgres or sqlite`);
  const minutes = envNumber('QL_BENCH_SOAK_MINUTES', 30, 0.5, env);
  const rate = env.QL_BENCH_SOAK_RATE ? envNumber('QL_BENCH_SOAK_RATE', 0, 0.01, env) : undefined;
  return {
    dialect,
    minutes,
    settleMinutes: Math.min(envNumber('QL_BENCH_SOAK_SETTLE_MINUTES', 5, 0, env), minutes / 2),
    sampleSeconds: envNumber('QL_BENCH_SOAK_SAMPLE_SECONDS', 15, 1, env),
    level: parseLevels(env.QL_BENCH_SOAK_LEVEL || '2x2', 'QL_BENCH_SOAK_LEVEL')[0]!,
    rate,
    rateShare: envNumber('QL_BENCH_SOAK_RATE_SHARE', 0.5, 0.01, env),
    probeRuns: Math.floor(envNumber('QL_BENCH_SOAK_PROBE_RUNS', 200, 10, env)),
    heapSnapshotDir: env.QL_BENCH_SOAK_HEAPSNAPSHOT_DIR || undefined,
    pgUrl: env.QL_BENCH_PG_URL || 'postgres://postgres@127.0.0.1:5432/postgres',
  };
}

export interface SoakSample {
  /** Seconds since the steady load started. */
  readonly t: number;
  readonly rssMiB: number;
  /** The anonymous part of the RSS (V8's heap, malloc), from /proc/<pid>/smaps_rollup. */
  readonly anonMiB: number;
  /** From the plane's `/metrics`: V8 heap used and its size, and memory V8 accounts outside it. */
  readonly heapUsedMiB: number;
  readonly heapTotalMiB: number;
  readonly externalMiB: number;
  /** Runs of the soak finished (any outcome) and not yet finished, from the database. */
  readonly finished: number;
  readonly backlog: number;
  readonly triggered: number;
  /** RSS of the worker processes, summed. */
  readonly workersRssMiB: number;
  readonly loadAvg1: number;
  /** On SQLite: the size of the plane's `-wal` file, MiB. */
  readonly walMiB?: number;
}

export interface SoakResult {
  readonly config: SoakConfig;
  /** Runs/s of the short drain the default rate is half of (undefined when the rate was given). */
  readonly measuredMax: number | undefined;
  /** The plane's RSS once the workers were online, before any run: where the load's climb starts. */
  readonly beforeLoadRssMiB: number;
  readonly rate: number;
  /** On SQLite: the pragmas in force on the plane's own connection, as its ready message reports them. */
  readonly sqlitePragmas: SqlitePragmas | undefined;
  readonly samples: SoakSample[];
  readonly failedRuns: Record<string, number>;
  readonly notes: string[];
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Runs of one task by state: done (any terminal status, counted by status) and not done. */
async function runsCounter(db: BenchDatabase) {
  const sql = `SELECT status, count(*) AS n FROM runs WHERE task_id = $1 GROUP BY status`;
  const terminal = new Set(['succeeded', 'failed', 'cancelled', 'timed_out', 'lost']);
  const collect = (rows: { status: string; n: number | string }[]) => {
    const done: Record<string, number> = {};
    let open = 0;
    for (const r of rows)
      if (terminal.has(r.status)) done[r.status] = Number(r.n);
      else open += Number(r.n);
    return { done, finished: Object.values(done).reduce((a, b) => a + b, 0), open };
  };
  if (db.dialect === 'sqlite') {
    const file = new Database(db.url.slice('sqlite:'.length), { readonly: true, fileMustExist: true });
    const statement = file.prepare<[string], { status: string; n: number }>(sql.replace('$1', '?'));
    return {
      count: async (taskId: string) => collect(statement.all(taskId)),
      close: async () => void file.close(),
    };
  }
  const client = new Client({ connectionString: db.url });
  client.on('error', () => undefined);
  await client.connect();
  return {
    count: async (taskId: string) =>
      collect((await client.query<{ status: string; n: string }>(sql, [taskId])).rows),
    close: () => client.end(),
  };
}

/** A shell task that writes one line (so every run uploads output too) and its trigger with a fresh key. */
async function soakTask(plane: PlaneProcess, name: string) {
  const task = await plane.admin<{ id: string }>('POST', '/api/v1/tasks', {
    name,
    command: 'echo soak',
    runtime: 'shell',
    timeoutMs: 60_000,
  });
  if (task.status !== 201) throw new Error(`create task: ${task.status} ${JSON.stringify(task.body)}`);
  const url = `${plane.ready.adminUrl}/api/v1/tasks/${task.body.id}/runs`;
  const headers = { authorization: `Bearer ${plane.adminToken}` };
  const trigger = async () => {
    const res = await fetch(url, {
      method: 'POST',
      headers: { ...headers, 'idempotency-key': randomUUID() },
    });
    await res.arrayBuffer();
    if (res.status !== 201) throw new Error(`trigger: ${res.status}`);
  };
  return { taskId: task.body.id, trigger };
}

/** The plane's V8 heap from its own `/metrics` (prom-client's default series, prefix `ql_`). */
async function heapFromMetrics(plane: PlaneProcess) {
  const res = await fetch(`${plane.ready.adminUrl}/metrics`, {
    headers: { authorization: `Bearer ${plane.adminToken}` },
  });
  const text = await res.text();
  const value = (name: string) => {
    const m = new RegExp(`^${name} ([0-9.e+]+)$`, 'm').exec(text);
    if (!m) throw new Error(`/metrics has no ${name}`);
    return Number(m[1]) / 2 ** 20;
  };
  return {
    heapUsedMiB: value('ql_nodejs_heap_size_used_bytes'),
    heapTotalMiB: value('ql_nodejs_heap_size_total_bytes'),
    externalMiB: value('ql_nodejs_external_memory_bytes'),
  };
}

/** The anonymous memory of a live process (heaps, malloc), MiB. */
export function anonMiB(pid: number): number {
  const text = readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8');
  const kib = /^Anonymous:\s+(\d+) kB$/m.exec(text)?.[1];
  return kib === undefined ? Number.NaN : Number(kib) / 1024;
}

/** Fires `rate` triggers per second, paced on a 100 ms tick, until `stop()`; counts them. */
function pacedTriggers(rate: number, trigger: () => Promise<void>, onError: (e: Error) => void) {
  let sent = 0;
  let stopped = false;
  const t0 = performance.now();
  const done = (async () => {
    while (!stopped) {
      const due = Math.floor(((performance.now() - t0) / 1000) * rate) - sent;
      if (due > 0) {
        sent += due;
        await Promise.all(Array.from({ length: due }, () => trigger().catch(onError)));
      }
      await sleep(100);
    }
  })();
  return {
    get sent() {
      return sent;
    },
    stop: async () => {
      stopped = true;
      await done;
    },
  };
}

/**
 * The most the plane and the workers sustain together: `n` runs triggered through the admin API by
 * four closed loops while the workers drain them, from the first trigger to the `n`-th finish, runs/s.
 */
async function triggerAndDrainRate(
  trigger: () => Promise<void>,
  count: () => Promise<{ finished: number }>,
  n: number,
  alive: () => void,
): Promise<number> {
  const from = (await count()).finished;
  const t0 = performance.now();
  let sent = 0;
  const loop = async () => {
    while (sent < n) {
      sent++;
      await trigger();
    }
  };
  const triggering = Promise.all([loop(), loop(), loop(), loop()]);
  await pollUntil(
    `${n} probe runs finished`,
    async () => {
      alive();
      return (await count()).finished >= from + n ? true : undefined;
    },
    600_000,
    20,
  );
  await triggering;
  return n / ((performance.now() - t0) / 1000);
}

export async function measureSoak(cfg: SoakConfig, log: (line: string) => void): Promise<SoakResult> {
  const notes: string[] = [];
  const ids = Array.from({ length: cfg.level.workers }, (_, i) => `soak-w${i + 1}`);
  const cleanup: (() => Promise<void>)[] = [];
  try {
    const pki = await createBenchPki(ids);
    cleanup.push(async () => pki.remove());
    const db = await createPlaneDatabase(cfg.dialect, cfg.pgUrl);
    cleanup.push(() => db.drop());
    const snapshotFlags = cfg.heapSnapshotDir
      ? ['--heapsnapshot-signal=SIGUSR2', `--diagnostic-dir=${cfg.heapSnapshotDir}`]
      : [];
    // QL_SQLITE_CACHE_MIB reaches the plane when given (ADR 0053): a soak can compare page cache bounds.
    const cacheMiB = process.env.QL_SQLITE_CACHE_MIB;
    const plane = await startPlaneProcess(db, pki, cacheMiB ? { QL_SQLITE_CACHE_MIB: cacheMiB } : {}, [
      ...CONTROL_PLANE_NODE_FLAGS,
      ...snapshotFlags,
    ]);
    cleanup.push(() => plane.stop());
    const walFile = db.dialect === 'sqlite' ? `${db.url.slice('sqlite:'.length)}-wal` : undefined;
    const sqlitePragmas = plane.ready.sqlite;
    if (sqlitePragmas) log(`soak: the plane's SQLite pragmas ${JSON.stringify(sqlitePragmas)}`);
    const counter = await runsCounter(db);
    cleanup.push(() => counter.close());
    const workers: BenchProcess[] = ids.map((id) =>
      spawnNode([...WORKER_NODE_FLAGS, ...snapshotFlags, WORKER_MAIN], {
        ...pki.workerEnv(id, plane.ready.ingressUrl),
        QL_WORKER_MAX_CONCURRENT_RUNS: String(cfg.level.slots),
        QL_WORKER_LOG_LEVEL: 'warn',
      }),
    );
    cleanup.push(async () => void (await Promise.all(workers.map((w) => w.stop()))));
    const alive = () => {
      for (const p of [plane.process, ...workers])
        if (p.child.exitCode !== null)
          throw new Error(`pid ${p.pid} exited:\n${p.output.slice(-20).join('\n')}`);
    };
    await pollUntil(
      'soak workers online',
      async () => {
        alive();
        const res = await plane.admin<{ items: unknown[] }>('GET', '/api/v1/workers?status=online');
        return res.body.items.length === ids.length ? true : undefined;
      },
      120_000,
      200,
    );
    const beforeLoadRssMiB = plane.process.rssMiB();
    const { taskId, trigger } = await soakTask(plane, 'soak');
    const count = () => counter.count(taskId);
    let measuredMax: number | undefined;
    if (cfg.rate === undefined) {
      // The maximum of triggering and draining together; a warm-up of as many runs first.
      for (const phase of ['warm-up', 'probe']) {
        const rate = await triggerAndDrainRate(trigger, count, cfg.probeRuns, alive);
        if (phase === 'probe') measuredMax = rate;
        log(
          `soak: ${phase}, ${cfg.probeRuns} runs triggered and drained by ${levelName(cfg.level)}: ${rate.toFixed(1)} runs/s`,
        );
      }
    }
    const rate = cfg.rate ?? measuredMax! * cfg.rateShare;
    const before = await count();
    log(`soak: ${rate.toFixed(2)} runs/s for ${cfg.minutes} min, a sample every ${cfg.sampleSeconds} s`);
    let triggerErrors = 0;
    const pacer = pacedTriggers(rate, trigger, (e) => {
      if (triggerErrors++ === 0) notes.push(`trigger failed: ${e.message}`);
    });
    const samples: SoakSample[] = [];
    const t0 = performance.now();
    let snapshots = 0;
    const snapshot = () => {
      if (!cfg.heapSnapshotDir) return;
      for (const p of [plane.process, ...workers]) p.child.kill('SIGUSR2');
      log(`soak: heap snapshot ${++snapshots} asked for`);
    };
    try {
      for (let k = 0; ; k++) {
        const at = t0 + k * cfg.sampleSeconds * 1000;
        if (at > t0 + cfg.minutes * 60_000 + 1) break;
        await sleep(Math.max(0, at - performance.now()));
        alive();
        if (snapshots === 0 && k * cfg.sampleSeconds >= cfg.settleMinutes * 60) snapshot();
        const runs = await count();
        const heap = await heapFromMetrics(plane);
        const sample: SoakSample = {
          t: (performance.now() - t0) / 1000,
          rssMiB: plane.process.rssMiB(),
          anonMiB: anonMiB(plane.process.pid),
          ...heap,
          finished: runs.finished - before.finished,
          backlog: runs.open,
          triggered: pacer.sent,
          workersRssMiB: workers.reduce((sum, w) => sum + rssMiB(w.pid), 0),
          loadAvg1: Number(readFileSync('/proc/loadavg', 'utf8').split(' ')[0]),
          ...(walFile ? { walMiB: existsSync(walFile) ? statSync(walFile).size / 2 ** 20 : 0 } : {}),
        };
        samples.push(sample);
        log(
          `soak ${(sample.t / 60).toFixed(2)} min: RSS ${sample.rssMiB.toFixed(1)} MiB (anon ${sample.anonMiB.toFixed(1)}), ` +
            `heap ${sample.heapUsedMiB.toFixed(1)}/${sample.heapTotalMiB.toFixed(1)} MiB, ext ${sample.externalMiB.toFixed(1)}, ` +
            `runs ${sample.finished} done, backlog ${sample.backlog}, load ${sample.loadAvg1}` +
            (sample.walMiB === undefined ? '' : `, WAL ${sample.walMiB.toFixed(1)} MiB`),
        );
      }
    } finally {
      await pacer.stop();
    }
    snapshot();
    if (triggerErrors) notes.push(`${triggerErrors} triggers failed in all`);
    const end = await count();
    const failedRuns = Object.fromEntries(
      Object.entries(end.done).filter(([status]) => status !== 'succeeded'),
    );
    if (snapshots) {
      // The snapshot is written synchronously by the plane; a cheap request proves it is done.
      await plane.admin('GET', '/api/v1/workers');
      notes.push(`heap snapshots in ${join(cfg.heapSnapshotDir!)}`);
    }
    return { config: cfg, measuredMax, beforeLoadRssMiB, rate, sqlitePragmas, samples, failedRuns, notes };
  } finally {
    for (const undo of cleanup.reverse())
      await undo().catch((error: Error) => notes.push(`cleanup: ${error.message.split('\n')[0]}`));
  }
}

/** Least-squares slope of y over x (per unit of x); NaN for fewer than two distinct x. */
export function leastSquaresSlope(points: readonly { x: number; y: number }[]): number {
  const n = points.length;
  if (n < 2) return Number.NaN;
  const mx = points.reduce((s, p) => s + p.x, 0) / n;
  const my = points.reduce((s, p) => s + p.y, 0) / n;
  let sxy = 0;
  let sxx = 0;
  for (const p of points) {
    sxy += (p.x - mx) * (p.y - my);
    sxx += (p.x - mx) ** 2;
  }
  return sxx === 0 ? Number.NaN : sxy / sxx;
}
