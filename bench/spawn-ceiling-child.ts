/**
 * The process the spawn ceiling runs in (bench/spawn-ceiling.ts starts it with the worker's V8
 * flags): `node <flags> spawn-ceiling-child.js <concurrency> <count> <warmup>` prints one JSON line,
 * a `SpawnCeiling`. It imports Node's own modules and /proc reading only, so that its address space,
 * which each fork copies, stays small: the figure is an upper bound for a worker, whose heap is larger.
 */
import { spawn } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import { processTreeCpuMs } from './lib/proc-cpu';

export interface SpawnCeiling {
  readonly concurrency: number;
  readonly spawns: number;
  readonly seconds: number;
  readonly spawnsPerSecond: number;
  /** CPU of the spawning Node process per spawn (fork/exec, pipes, waitpid), counted window only. */
  readonly parentCpuMsPerSpawn: number;
  /** CPU of the `sh -c true` children per spawn (reaped into the parent's cutime/cstime). */
  readonly childCpuMsPerSpawn: number;
  /** Resident set of the spawning process at the end (what each fork copies the page tables of). */
  readonly parentRssMiB: number;
}

/**
 * One run as the executor starts it, without its work folder, journal or reaper: also the job of the
 * fair peer (bench/peer-child.ts).
 */
export async function spawnOne(): Promise<void> {
  const child = spawn('/bin/sh', ['-c', 'true'], {
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: '/', LANG: 'C.UTF-8' },
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const exited = new Promise<number | null>((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', resolve);
  });
  const closed = new Promise((resolve) => child.once('close', resolve));
  child.stdout.resume();
  child.stderr.resume();
  const [code] = await Promise.all([exited, closed]);
  if (code !== 0) throw new Error(`sh -c true exited ${code}`);
}

/** `concurrency` closed loops spawn `warmup`, then `count` counted no-ops between them. */
export async function spawnLoops(concurrency: number, count: number, warmup: number): Promise<SpawnCeiling> {
  const closedLoops = async (n: number) => {
    let started = 0;
    const loop = async () => {
      while (started < n) {
        started++;
        await spawnOne();
      }
    };
    await Promise.all(Array.from({ length: concurrency }, loop));
  };
  await closedLoops(warmup);
  const cpu0 = process.cpuUsage();
  const children0 = processTreeCpuMs('self').children;
  const t0 = performance.now();
  await closedLoops(count);
  const seconds = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  const childrenMs = processTreeCpuMs('self').children - children0;
  return {
    concurrency,
    spawns: count,
    seconds,
    spawnsPerSecond: count / seconds,
    parentCpuMsPerSpawn: (cpu.user + cpu.system) / 1000 / count,
    childCpuMsPerSpawn: childrenMs / count,
    parentRssMiB: process.memoryUsage().rss / 2 ** 20,
  };
}

if (require.main === module) {
  const [concurrency, count, warmup] = process.argv.slice(2).map(Number);
  for (const [name, v, min] of [
    ['concurrency', concurrency, 1],
    ['count', count, 1],
    ['warmup', warmup, 0],
  ] as const) {
    if (!Number.isInteger(v) || v! < min) {
      console.error(`spawn-ceiling: ${name} must be an integer >= ${min}, got ${v}`);
      process.exit(2);
    }
  }
  spawnLoops(concurrency!, count!, warmup!).then(
    (result) => console.log(JSON.stringify(result)),
    (error: Error) => {
      console.error(error.stack ?? error.message);
      process.exit(1);
    },
  );
}
