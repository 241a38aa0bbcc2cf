/**
 * The parts of the `peer` group (bench/peer-main.ts): its levels (W worker processes × S slots), the
 * peer's samples in a process of their own (bench/peer-child.ts), and our latency at idle with its
 * breakdown by step from the run's events.
 */
import { join } from 'node:path';
import { Client } from 'pg';
import { percentile } from './dispatch';
import { median } from './lib/measure';
import { DIST, PlaneProcess } from './lib/plane';
import { pollUntil, spawnNode } from './lib/processes';
import type { PeerChildAnswer, PeerChildRequest } from './peer-child';

/** W real worker processes with S slots each; the peer runs at concurrency W × S. */
export interface Level {
  readonly workers: number;
  readonly slots: number;
}

export function levelName(level: Level): string {
  return `${level.workers}×${level.slots}`;
}

/** `1x1,4x1,4x4` (or `×`): W in 1..64, S in 1..64. Throws a message naming the variable. */
export function parseLevels(text: string, variable = 'QL_BENCH_PEER_LEVELS'): Level[] {
  const levels = text.split(',').map((part) => {
    const m = /^\s*(\d+)\s*[x×]\s*(\d+)\s*$/.exec(part);
    const [workers, slots] = m ? [Number(m[1]), Number(m[2])] : [Number.NaN, Number.NaN];
    if (!(workers >= 1 && workers <= 64 && slots >= 1 && slots <= 64))
      throw new Error(`${variable}: "${part.trim()}" is not W×S (e.g. 4x4; W and S in 1..64)`);
    return { workers, slots };
  });
  if (levels.length === 0) throw new Error(`${variable}: no level`);
  return levels;
}

/** Runs one peer sample in its own `node` process (no V8 flags, as graphile-worker runs by default). */
export async function peerSample(request: PeerChildRequest): Promise<PeerChildAnswer> {
  const proc = spawnNode([join(DIST, 'bench/peer-child.js'), JSON.stringify(request)], {});
  const code = await proc.exited;
  const answer = proc.lines.find((l) => typeof l.peer === 'object');
  if (code !== 0 || !answer) throw new Error(`peer process exited ${code}: ${proc.output.join('\n')}`);
  return answer.peer as PeerChildAnswer;
}

/**
 * The steps of one run at idle, in ms, from the trigger sent (bench clock) and the run's events (the
 * database's, same host clock, ms resolution): the trigger's round trip to the insert, the wait for a
 * claim, and each lease step the worker reports.
 */
export const LATENCY_STEPS = [
  'trigger → created',
  'created → dispatching',
  'dispatching → claimed',
  'claimed → starting',
  'starting → running',
  'running → finished',
] as const;
export type LatencyStep = (typeof LATENCY_STEPS)[number];
const STEP_EVENTS = [
  'run.created',
  'run.dispatching',
  'attempt.claimed',
  'attempt.starting',
  'attempt.running',
  'run.finished',
] as const;

export interface RunLatency {
  /** Trigger sent → `run.finished`. */
  readonly totalMs: number;
  readonly steps: Record<LatencyStep, number>;
}

/** Splits one run's latency by its events' times; throws if one of them is missing or repeated. */
export function runLatency(sentMs: number, events: readonly { type: string; at: string }[]): RunLatency {
  const times = STEP_EVENTS.map((type) => {
    const found = events.filter((e) => e.type === type);
    if (found.length !== 1) throw new Error(`run event ${type}: ${found.length} (a run at idle has one)`);
    return Date.parse(found[0]!.at);
  });
  const points = [sentMs, ...times];
  const steps = Object.fromEntries(LATENCY_STEPS.map((step, i) => [step, points[i + 1]! - points[i]!]));
  return { totalMs: points.at(-1)! - sentMs, steps: steps as Record<LatencyStep, number> };
}

export interface LatencySummary {
  readonly samples: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly maxMs: number;
}

export function summarize(values: readonly number[]): LatencySummary {
  return {
    samples: values.length,
    p50Ms: percentile(values, 50),
    p99Ms: percentile(values, 99),
    maxMs: values.length ? Math.max(...values) : Number.NaN,
  };
}

export interface IdleOptions {
  readonly samples: number;
  readonly warmup: number;
  /** Idle pause before each trigger: uniform in [pauseMs, 2 × pauseMs). */
  readonly pauseMs: number;
}

/**
 * Our latency at idle: one run at a time through the admin API to a worker that waits for it, after
 * an idle pause. Its end is read from the database (`runs.status`, polled every 5 ms on a connection
 * of its own, not through the control plane it would disturb); then its events through the admin API.
 */
export async function oursAtIdle(
  plane: PlaneProcess,
  databaseUrl: string,
  trigger: () => Promise<{ runId: string }>,
  opts: IdleOptions,
  alive: () => void,
): Promise<RunLatency[]> {
  const client = new Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const latencies: RunLatency[] = [];
    for (let i = 0; i < opts.warmup + opts.samples; i++) {
      await new Promise((resolve) => setTimeout(resolve, opts.pauseMs * (1 + Math.random())));
      const sentMs = Date.now();
      const { runId } = await trigger();
      const status = await pollUntil(
        `run ${runId} at idle ends`,
        async () => {
          alive();
          const { rows } = await client.query<{ status: string }>('SELECT status FROM runs WHERE id = $1', [
            runId,
          ]);
          const s = rows[0]?.status;
          return s === undefined || ['queued', 'dispatching', 'running', 'retry_wait'].includes(s)
            ? undefined
            : s;
        },
        30_000,
        5,
      );
      if (status !== 'succeeded') throw new Error(`run ${runId} at idle ended ${status}`);
      const detail = await plane.admin<{ events: { type: string; at: string }[] }>(
        'GET',
        `/api/v1/runs/${runId}`,
      );
      if (detail.status !== 200) throw new Error(`GET /api/v1/runs/${runId}: ${detail.status}`);
      if (i >= opts.warmup) latencies.push(runLatency(sentMs, detail.body.events));
    }
    return latencies;
  } finally {
    await client.end();
  }
}

/** p50 and p99 of each step over the samples. */
export function stepSummary(latencies: readonly RunLatency[]): Record<LatencyStep, LatencySummary> {
  return Object.fromEntries(
    LATENCY_STEPS.map((step) => [step, summarize(latencies.map((l) => l.steps[step]))]),
  ) as Record<LatencyStep, LatencySummary>;
}

/** The median over rounds of a figure both sides have in a round, and of their ratio within it. */
export function paired(rounds: readonly { ours?: number; peer?: number }[]): {
  ours: number;
  peer: number;
  ratio: number;
} {
  const both = rounds.filter((r) => r.ours !== undefined && r.peer !== undefined && r.peer > 0);
  return {
    ours: median(rounds.flatMap((r) => (r.ours === undefined ? [] : [r.ours]))),
    peer: median(rounds.flatMap((r) => (r.peer === undefined ? [] : [r.peer]))),
    ratio: median(both.map((r) => r.ours! / r.peer!)),
  };
}
