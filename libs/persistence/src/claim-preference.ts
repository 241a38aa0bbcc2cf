import {
  CANDIDATE_PAGE,
  Capabilities,
  PlacementSpec,
  PreferenceQuestion,
  PreferredLabel,
  decidePreference,
  preferenceLookup,
} from '@ql/domain';
import { CANDIDATE_COLUMNS, CandidateRow, toCandidates } from './placement-candidates';
import { SqlExecutor } from './sql-executor';

/** Label patterns one candidate read looks for at most; a run whose labels fall past them is not held. */
export const MAX_PREFERRED_PATTERNS = 32;

/** A run the puller matches, as the claim's page read it. */
export interface PreferenceRun {
  readonly id: string;
  readonly spec: PlacementSpec;
  /** `queue_order`: when the run last became queued, epoch ms of the database clock. */
  readonly queuedAt: number;
}

/**
 * Live, online, enabled workers other than the puller with a free slot and, in their capabilities
 * document (canonical JSON), the text of one of the labels: a prefilter, the domain decides exactly.
 * The number of patterns is a power of two (padded), so only a handful of statement texts exist.
 */
function candidateSql(patterns: number): string {
  const likes = Array.from({ length: patterns }, (_, i) => `w.capabilities_json LIKE :l${i} ESCAPE '!'`);
  return `SELECT ${CANDIDATE_COLUMNS} FROM workers w
    WHERE w.worker_id <> :workerId AND w.status = 'online' AND w.disabled = :no AND w.lease_expires_at > {now}
      AND w.active_leases < w.max_concurrent_runs AND w.active_leases < w.available_slots
      AND (${likes.join(' OR ')})
    ORDER BY w.worker_id LIMIT :page`;
}

/** `"key":"value"` as canonical JSON writes it, as a LIKE pattern (escape character `!`). */
export function labelPattern(label: Pick<PreferredLabel, 'key' | 'value'>): string {
  const text = `${JSON.stringify(label.key)}:${JSON.stringify(label.value)}`;
  return `%${text.replace(/[!%_]/g, (c) => `!${c}`)}%`;
}

/**
 * R-PLC-2 inside the claim: the ids among `runs` that the puller leaves to a worker with a strictly
 * higher preferred score during their hold. No statement when no run's preference is open (no
 * preferred rules, hold over or off, or the puller has every preferred label); otherwise one read of
 * at most CANDIDATE_PAGE workers (plus the capabilities documents of digests not seen yet).
 */
export async function heldRuns(
  tx: SqlExecutor,
  puller: { readonly workerId: string; readonly capabilities: Capabilities },
  runs: readonly PreferenceRun[],
  now: number,
  holdMs: number,
): Promise<ReadonlySet<string>> {
  const open: PreferenceQuestion[] = [];
  const ids: string[] = [];
  const patterns = new Set<string>();
  for (const run of runs) {
    const question = { ...puller, spec: run.spec, queuedAt: run.queuedAt, now, holdMs };
    const missing = preferenceLookup(question);
    if (missing.length === 0) continue;
    open.push(question);
    ids.push(run.id);
    for (const label of missing) patterns.add(labelPattern(label));
  }
  if (open.length === 0) return new Set();
  const list = [...patterns].slice(0, MAX_PREFERRED_PATTERNS);
  let size = 1;
  while (size < list.length) size *= 2;
  const params: Record<string, string | number | boolean> = {
    workerId: puller.workerId,
    no: false,
    page: CANDIDATE_PAGE,
  };
  for (let i = 0; i < size; i++) params[`l${i}`] = list[Math.min(i, list.length - 1)]!;
  const rows = await tx.many<CandidateRow>(candidateSql(size), params);
  const candidates = await toCandidates(tx, rows);
  const held = new Set<string>();
  open.forEach((question, i) => {
    if (decidePreference(question, candidates).kind === 'hold') held.add(ids[i]!);
  });
  return held;
}
