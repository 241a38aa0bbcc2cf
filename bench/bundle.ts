/**
 * The pure parts of the `bundle` group (bench/bundle-main.ts, issue 19): its settings, the bundle it
 * pushes (many files of random bytes, a node script) and the summary of its samples by variant.
 */
import { createHash, randomBytes } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import { TarInput, writeTar } from '@ql/contracts';
import { percentile } from './dispatch';
import { envNumber, median } from './lib/measure';
import type { CpuReading } from './lib/proc-cpu';

/** first: a revision whose bundle the worker never had; cached: its later runs; inline: no bundle. */
export const BUNDLE_VARIANTS = ['first', 'cached', 'inline'] as const;
export type BundleVariant = (typeof BUNDLE_VARIANTS)[number];

/** The target: a cached bundle's trigger → running within 10 % of an inline command's. */
export const CACHED_TARGET = 1.1;

/** The trivial work of every run: the bundle's `run.js`, the inline task's `node -e`. */
export const SCRIPT = "console.log('ok')";
export const BUNDLE_COMMAND = 'node run.js';
export const INLINE_COMMAND = `node -e "${SCRIPT}"`;

export interface BundleConfig {
  /** Rounds; each pushes a new bundle (a first run), then alternates cached and inline runs. */
  readonly rounds: number;
  /** Cached runs and inline runs per round (each). */
  readonly runsPerRound: number;
  /** The bundle's random bytes, MiB, spread over `files` files. */
  readonly mib: number;
  readonly files: number;
  readonly dialects: readonly ('sqlite' | 'postgres')[];
}

export function bundleConfig(env: NodeJS.ProcessEnv = process.env): BundleConfig {
  const dialects = (env.QL_BENCH_DIALECTS || 'sqlite,postgres').split(',').map((s) => s.trim());
  for (const d of dialects)
    if (d !== 'sqlite' && d !== 'postgres') throw new Error(`QL_BENCH_DIALECTS: unknown dialect "${d}"`);
  return {
    rounds: Math.floor(envNumber('QL_BENCH_BUNDLE_ROUNDS', 8, 1, env)),
    runsPerRound: Math.floor(envNumber('QL_BENCH_BUNDLE_RUNS', 5, 1, env)),
    mib: envNumber('QL_BENCH_BUNDLE_MIB', 10, 0.01, env),
    files: Math.floor(envNumber('QL_BENCH_BUNDLE_FILES', 500, 1, env)),
    dialects: dialects as BundleConfig['dialects'],
  };
}

/**
 * `files` files of random bytes, `mib` MiB together (incompressible: the archive is as big), 20 to a
 * folder, and `run.js` at the top. Answers the `.tar.gz` and its digest.
 */
export function benchBundle(mib: number, files: number): { content: Buffer; digest: string; bytes: number } {
  const total = Math.round(mib * 1024 * 1024);
  const entries: TarInput[] = [{ path: 'run.js', type: 'file', mode: 0o644, data: Buffer.from(SCRIPT) }];
  let bytes = 0;
  for (let i = 0; i < files; i++) {
    const size = Math.floor(((i + 1) * total) / files) - Math.floor((i * total) / files);
    entries.push({
      path: `data/d${Math.floor(i / 20)}/f${i}.bin`,
      type: 'file',
      mode: 0o644,
      data: randomBytes(size),
    });
    bytes += size;
  }
  const content = gzipSync(writeTar(entries), { level: 1 });
  return { content, digest: createHash('sha256').update(content).digest('hex'), bytes };
}

/** One run: its variant, trigger → running and the steps between, and the CPU it cost by process. */
export interface BundleSample {
  readonly dialect: string;
  readonly round: number;
  readonly variant: BundleVariant;
  /** The trigger sent (bench clock) → the `attempt.running` event (database time, same host). */
  readonly toRunningMs: number;
  /** `attempt.starting` → `attempt.running`: where the bundle is taken, copied and the process spawned. */
  readonly startingToRunningMs: number;
  /** CPU ms from the trigger to the run's work folder removed, by process. */
  readonly cpuMs: CpuReading;
}

export interface VariantSummary {
  readonly dialect: string;
  readonly variant: BundleVariant;
  readonly runs: number;
  readonly medianMs: number;
  readonly p90Ms: number;
  /** Median of this variant / median of inline (same dialect, same run). */
  readonly ratioToInline: number;
  /**
   * Median over the round's pairs of this variant's run / the inline run beside it (the k-th of each
   * in a round; the first run: the round's first inline run): less moved by a busy neighbour than the
   * ratio of medians, as both runs of a pair share their moment.
   */
  readonly pairedRatio: number;
  readonly startingToRunningMedianMs: number;
  /** The same ratio for `attempt.starting` → `attempt.running`, the step where the bundle is taken. */
  readonly startingToRunningRatio: number;
  /** Median CPU ms per run by process. */
  readonly cpuMs: CpuReading;
}

export function summarizeBundle(samples: readonly BundleSample[]): VariantSummary[] {
  const dialects = [...new Set(samples.map((s) => s.dialect))];
  return dialects.flatMap((dialect) => {
    const of = (variant: BundleVariant) =>
      samples.filter((s) => s.dialect === dialect && s.variant === variant);
    const inline = median(of('inline').map((s) => s.toRunningMs));
    const inlineStep = median(of('inline').map((s) => s.startingToRunningMs));
    return BUNDLE_VARIANTS.filter((v) => of(v).length > 0).map((variant) => {
      const runs = of(variant);
      const ms = runs.map((s) => s.toRunningMs);
      const components = [...new Set(runs.flatMap((s) => Object.keys(s.cpuMs)))];
      const pairs = [...new Set(runs.map((s) => s.round))].flatMap((round) => {
        const inRound = (v: BundleVariant) => of(v).filter((s) => s.round === round);
        const beside = inRound('inline');
        return inRound(variant).flatMap((s, k) =>
          beside[k] ? [s.toRunningMs / beside[k]!.toRunningMs] : [],
        );
      });
      const step = median(runs.map((s) => s.startingToRunningMs));
      return {
        dialect,
        variant,
        runs: runs.length,
        medianMs: median(ms),
        p90Ms: percentile(ms, 90),
        ratioToInline: median(ms) / inline,
        pairedRatio: median(pairs),
        startingToRunningMedianMs: step,
        startingToRunningRatio: step / inlineStep,
        cpuMs: Object.fromEntries(
          components.map((c) => [c, median(runs.map((s) => s.cpuMs[c] ?? Number.NaN))]),
        ),
      };
    });
  });
}

/**
 * The order of one round's runs after its first: cached and inline alternated, `n` of each, the
 * round's parity choosing which goes first, so neither always follows the other.
 */
export function roundOrder(round: number, n: number): BundleVariant[] {
  const pair: BundleVariant[] = round % 2 ? ['cached', 'inline'] : ['inline', 'cached'];
  return Array.from({ length: n }, () => pair).flat();
}
