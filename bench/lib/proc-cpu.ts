/**
 * CPU time of processes from /proc, for the benches that split a run's CPU by component (control
 * plane, worker, the no-op children, PostgreSQL). Everything is cumulative ms since each process
 * started; a bench reads it before and after a window and divides the difference by the runs.
 *
 * A child's CPU lands in its parent's `cutime`/`cstime` when the parent reaps it (waitpid), for its
 * whole life; while it lives it is only in its own `utime`/`stime`. So "a process's children" =
 * reaped (`cutime + cstime`) + live (each live child's `utime + stime`): a child alive at the first
 * reading and reaped before the second is counted once, its time before the window cancelling out.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';

/** The fields of /proc/<pid>/stat the benches use; times in clock ticks. */
export interface ProcStat {
  readonly pid: number;
  readonly comm: string;
  readonly state: string;
  readonly ppid: number;
  readonly utime: number;
  readonly stime: number;
  /** Reaped children (and, recursively, the children they reaped). */
  readonly cutime: number;
  readonly cstime: number;
}

/**
 * Parses one /proc/<pid>/stat line. The command name (field 2) is in parentheses and may itself hold
 * spaces and parentheses, so the fields after it are counted from the last `)`.
 */
export function parseProcStat(text: string): ProcStat {
  const open = text.indexOf('(');
  const close = text.lastIndexOf(')');
  if (open < 0 || close < open) throw new Error(`not a /proc/<pid>/stat line: ${text.slice(0, 80)}`);
  // After ") ": state is field 3, so index i here is field i + 3.
  const rest = text
    .slice(close + 2)
    .trim()
    .split(/\s+/);
  const field = (n: number): number => {
    const value = Number(rest[n - 3]);
    if (rest[n - 3] === undefined || !Number.isInteger(value) || value < 0)
      throw new Error(`/proc/<pid>/stat: field ${n} is "${rest[n - 3]}" in ${text.slice(0, 80)}`);
    return value;
  };
  return {
    pid: Number(text.slice(0, open).trim()),
    comm: text.slice(open + 1, close),
    state: rest[0] ?? '',
    ppid: field(4),
    utime: field(14),
    stime: field(15),
    cutime: field(16),
    cstime: field(17),
  };
}

let ticksPerSecond: number | undefined;

/** USER_HZ (`getconf CLK_TCK`, read once); 100 if getconf is missing or answers nonsense. */
export function clockTicksPerSecond(): number {
  if (ticksPerSecond === undefined) {
    let value = Number.NaN;
    try {
      value = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim());
    } catch {
      // no getconf: the Linux default below
    }
    ticksPerSecond = Number.isInteger(value) && value > 0 ? value : 100;
  }
  return ticksPerSecond;
}

export function readProcStat(pid: number | 'self'): ProcStat {
  return parseProcStat(readFileSync(`/proc/${pid}/stat`, 'utf8'));
}

export function ticksToMs(ticks: number): number {
  return (ticks * 1000) / clockTicksPerSecond();
}

/** The process's own CPU (user + system), ms. */
export function ownCpuMs(stat: ProcStat): number {
  return ticksToMs(stat.utime + stat.stime);
}

/** The pids of a live process's live children (/proc/<pid>/task/<tid>/children, every thread). */
export function liveChildren(pid: number | 'self'): number[] {
  const pids: number[] = [];
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    let text: string;
    try {
      text = readFileSync(`/proc/${pid}/task/${tid}/children`, 'utf8');
    } catch {
      continue; // the thread ended between the listing and the read
    }
    for (const p of text.trim().split(/\s+/)) if (p) pids.push(Number(p));
  }
  return pids;
}

/** A live child's own CPU, or 0 if it was reaped since it was listed (then it is in the parent's cutime). */
function liveOwnCpuMs(pid: number): number {
  try {
    return ownCpuMs(readProcStat(pid));
  } catch {
    return 0;
  }
}

/**
 * One process split in two: its own CPU, and its children's (reaped + live, see above). Read the
 * parent's reaped figure after listing the live children, so that a child reaped in between is
 * counted in cutime rather than lost.
 */
export function processTreeCpuMs(pid: number | 'self'): { own: number; children: number } {
  const live = liveChildren(pid).reduce((sum, child) => sum + liveOwnCpuMs(child), 0);
  const stat = readProcStat(pid);
  return { own: ownCpuMs(stat), children: ticksToMs(stat.cutime + stat.cstime) + live };
}

/** Sums of cumulative CPU ms by component; a component that cannot be read is left out. */
export type CpuReading = Record<string, number>;

/** Reads every component now. */
export function readCpu(components: Record<string, () => number>): CpuReading {
  const reading: CpuReading = {};
  for (const [name, read] of Object.entries(components)) reading[name] = read();
  return reading;
}

/** ms per run of each component between two readings, and their `total`. */
export function cpuPerRun(before: CpuReading, after: CpuReading, runs: number): CpuReading {
  if (!(runs > 0)) throw new Error(`cpuPerRun: runs must be > 0, got ${runs}`);
  const perRun: CpuReading = {};
  let total = 0;
  for (const name of Object.keys(before)) {
    if (after[name] === undefined) throw new Error(`cpuPerRun: no second reading of "${name}"`);
    const ms = (after[name] - before[name]!) / runs;
    perRun[name] = ms;
    total += ms;
  }
  perRun.total = total;
  return perRun;
}

/**
 * CPU ms spent between two per-pid readings (pid → own CPU ms) by the processes of the second one:
 * a pid new in the second counts from 0 (it started in between); a pid of the first that is gone
 * from the second is lost (an undercount: nothing reaps it into a figure this bench reads).
 */
export function perPidDelta(before: ReadonlyMap<number, number>, after: ReadonlyMap<number, number>): number {
  let sum = 0;
  for (const [pid, ms] of after) sum += ms - (before.get(pid) ?? 0);
  return sum;
}
