/**
 * ADR 0027: would claims and completions arriving together pay for a batch, as heartbeats do? After
 * each drain, the events the drain wrote (database time) tell how close together they came: the mean
 * size of the batches a coalescing window of `windowMs` would have formed (greedy: a batch opens at an
 * arrival and takes every arrival within the window after it). 1.0 = nothing to coalesce.
 */
import BetterSqlite3 from 'better-sqlite3';
import { Client } from 'pg';
import { BenchDatabase } from './lib/plane';

/** The event each step writes once per run: the claim's and the completion's. */
export const ARRIVAL_EVENTS = { claims: 'attempt.claimed', completions: 'attempt.finished' } as const;
export type ArrivalKind = keyof typeof ARRIVAL_EVENTS;
export const ARRIVAL_WINDOWS_MS = [2, 5] as const;

/** Mean batch size per kind and window, e.g. `{ claims: { 2: 1.12, 5: 1.3 }, … }`. */
export type ArrivalBatches = Record<ArrivalKind, Record<number, number>>;

/** Mean size of the batches a window of `windowMs` opens at each first arrival (times sorted). */
export function meanBatch(sortedMs: readonly number[], windowMs: number): number {
  if (sortedMs.length === 0) return Number.NaN;
  let batches = 0;
  for (let i = 0; i < sortedMs.length;) {
    const opened = sortedMs[i]!;
    batches++;
    while (i < sortedMs.length && sortedMs[i]! - opened <= windowMs) i++;
  }
  return sortedMs.length / batches;
}

/** Event times (epoch ms, sorted) of `type` written between `fromMs` and `toMs`. */
async function eventTimes(db: BenchDatabase, type: string, fromMs: number, toMs: number): Promise<number[]> {
  if (db.dialect === 'sqlite') {
    const file = new BetterSqlite3(db.url.replace(/^sqlite:/, ''), { readonly: true });
    try {
      const rows = file
        .prepare('SELECT at FROM run_events WHERE type = ? AND at BETWEEN ? AND ? ORDER BY at')
        .all(type, fromMs, toMs) as { at: number }[];
      return rows.map((r) => Number(r.at));
    } finally {
      file.close();
    }
  }
  const client = new Client({ connectionString: db.url });
  await client.connect();
  try {
    const { rows } = await client.query<{ ms: string }>(
      `SELECT (extract(epoch FROM at) * 1000)::float8 AS ms FROM run_events
       WHERE type = $1 AND at BETWEEN to_timestamp($2 / 1000.0) AND to_timestamp($3 / 1000.0) ORDER BY at`,
      [type, fromMs, toMs],
    );
    return rows.map((r) => Number(r.ms));
  } finally {
    await client.end();
  }
}

/** The batches claims and completions written between `fromMs` and `toMs` would have formed. */
export async function arrivalBatches(
  db: BenchDatabase,
  fromMs: number,
  toMs: number,
): Promise<ArrivalBatches> {
  const out = {} as ArrivalBatches;
  for (const kind of Object.keys(ARRIVAL_EVENTS) as ArrivalKind[]) {
    const times = await eventTimes(db, ARRIVAL_EVENTS[kind], fromMs, toMs);
    out[kind] = Object.fromEntries(ARRIVAL_WINDOWS_MS.map((w) => [w, meanBatch(times, w)]));
  }
  return out;
}
