import { performance } from 'node:perf_hooks';

export interface MeasureWindow {
  /** Operations completing before this are not counted. */
  readonly warmupMs: number;
  /** Length of the counted window. */
  readonly measureMs: number;
}

export interface Sample {
  /** Operations completed inside the counted window. */
  readonly ops: number;
  /** Operations completed in all, warm-up included. */
  readonly totalOps: number;
  readonly seconds: number;
  readonly opsPerSecond: number;
  /**
   * CPU time of this Node process (user + system) per operation, warm-up included: what the
   * TypeScript and the driver cost, much less sensitive to a busy neighbour than ops/s.
   */
  readonly processCpuUsPerOp: number;
  /** Time the closing `settle` took (included in `seconds`); 0 without one. */
  readonly settleMs: number;
  /** Figures the `settle` step reported (SQLite: WAL size at the end of the window). */
  readonly detail?: Record<string, number>;
}

/**
 * Work the database defers (SQLite: WAL checkpoints), so that no variant leaves its bill to the next
 * one. Both run synchronously, between operations.
 */
export interface Settle {
  /** Untimed, when the warm-up ends: the counted window starts from a clean state, after this. */
  reset(): void;
  /** Timed, after the window: its time is added to the sample's seconds. May return figures to keep. */
  settle(): Record<string, number> | void;
}

/**
 * Runs one closed loop per entry of `ops` concurrently (each awaits its operation, then issues the
 * next) and counts the operations that complete inside the window after the warm-up.
 *
 * The loops read the clock themselves after each operation: with a synchronous driver (better-sqlite3)
 * every `await` resolves in the microtask queue, so a timer would never get to fire.
 */
export async function closedLoops(
  ops: ReadonlyArray<() => Promise<unknown>>,
  window: MeasureWindow,
  settle?: Settle,
): Promise<Sample> {
  const cpuStart = process.cpuUsage();
  const warmEnd = performance.now() + window.warmupMs;
  let windowStart: number | undefined;
  let end = Number.POSITIVE_INFINITY;
  let counted = 0;
  let total = 0;
  const loop = async (op: () => Promise<unknown>): Promise<void> => {
    for (;;) {
      await op();
      total++;
      const t = performance.now();
      if (windowStart === undefined) {
        if (t < warmEnd) continue;
        settle?.reset();
        windowStart = performance.now();
        end = windowStart + window.measureMs;
        continue;
      }
      if (t >= end) return;
      counted++;
    }
  };
  await Promise.all(ops.map(loop));
  const settleStart = performance.now();
  const detail = settle?.settle() ?? undefined;
  const settleMs = performance.now() - settleStart;
  const cpu = process.cpuUsage(cpuStart);
  const seconds = (window.measureMs + settleMs) / 1000;
  return {
    ops: counted,
    totalOps: total,
    seconds,
    opsPerSecond: counted / seconds,
    processCpuUsPerOp: (cpu.user + cpu.system) / Math.max(total, 1),
    settleMs,
    ...(detail ? { detail } : {}),
  };
}

export function median(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

export function envNumber(
  name: string,
  fallback: number,
  min: number,
  env: NodeJS.ProcessEnv = process.env,
): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value < min)
    throw new Error(`${name} must be a number >= ${min}, got "${raw}"`);
  return value;
}
