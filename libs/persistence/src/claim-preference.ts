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

/** Labels one candidate read looks for at most; a run whose labels fall past them is not held. */
export const MAX_PREFERRED_PATTERNS = 32;

/** A run the puller matches, as the claim's page read it. */
export interface PreferenceRun {
  readonly id: string;
  readonly spec: PlacementSpec;
  /** `queue_order`: when the run last became queued, epoch ms of the database clock. */
  readonly queuedAt: number;
}

/**
 * Live, online, enabled workers other than the puller with a free slot and one of the labels, found
 * through `worker_labels` (index `worker_labels_match (key, value, worker_id)`): only workers that have
 * a label are read, however many registered workers lack them (ADR 0021). The domain decides exactly.
 * The number of labels is a power of two (padded), so only a handful of statement texts exist.
 */
export function candidateSql(labels: number): string {
  const match = Array.from({ length: labels }, (_, i) => `(l.key = :k${i} AND l.value = :v${i})`);
  return `SELECT ${CANDIDATE_COLUMNS} FROM workers w
    WHERE w.worker_id IN (SELECT l.worker_id FROM worker_labels l WHERE ${match.join(' OR ')})
      AND w.worker_id <> :workerId AND w.status = 'online' AND w.disabled = :no AND w.lease_expires_at > {now}
      AND w.active_leases < w.max_concurrent_runs AND w.active_leases < w.available_slots
    ORDER BY w.worker_id LIMIT :page`;
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
  const labels = new Map<string, Pick<PreferredLabel, 'key' | 'value'>>();
  for (const run of runs) {
    const question = { ...puller, spec: run.spec, queuedAt: run.queuedAt, now, holdMs };
    const missing = preferenceLookup(question);
    if (missing.length === 0) continue;
    open.push(question);
    ids.push(run.id);
    for (const label of missing) labels.set(JSON.stringify([label.key, label.value]), label);
  }
  if (open.length === 0) return new Set();
  const list = [...labels.values()].slice(0, MAX_PREFERRED_PATTERNS);
  let size = 1;
  while (size < list.length) size *= 2;
  const params: Record<string, string | number | boolean> = {
    workerId: puller.workerId,
    no: false,
    page: CANDIDATE_PAGE,
  };
  for (let i = 0; i < size; i++) {
    const label = list[Math.min(i, list.length - 1)]!;
    params[`k${i}`] = label.key;
    params[`v${i}`] = label.value;
  }
  const rows = await tx.many<CandidateRow>(candidateSql(size), params);
  const candidates = await toCandidates(tx, rows);
  const held = new Set<string>();
  open.forEach((question, i) => {
    if (decidePreference(question, candidates).kind === 'hold') held.add(ids[i]!);
  });
  return held;
}
