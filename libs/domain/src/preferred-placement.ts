import { Capabilities } from './capabilities';
import {
  PlacementCandidate,
  PlacementSpec,
  PreferredLabel,
  hasLabel,
  placementScore,
  rankCandidates,
} from './placement';

/** A run a pulling worker matches, and how long the run waits for a better-scored worker (R-PLC-2). */
export interface PreferenceQuestion {
  readonly spec: PlacementSpec;
  /** The pulling worker. */
  readonly workerId: string;
  readonly capabilities: Capabilities;
  /** When the run last became queued, and now: epoch milliseconds of the same (database) clock. */
  readonly queuedAt: number;
  readonly now: number;
  /** How long after `queuedAt` a better-scored worker gets the first chance; 0 turns holding off. */
  readonly holdMs: number;
}

export type PreferenceDecision =
  | { readonly kind: 'take' }
  /** Left for `workerId` (a strictly higher preferred score) until `until`, when anyone may take it. */
  | { readonly kind: 'hold'; readonly workerId: string; readonly until: number };

const TAKE: PreferenceDecision = Object.freeze({ kind: 'take' });

/**
 * The preferred labels the puller lacks while the run is inside its hold: only a worker with one of
 * them can outscore the puller. Empty means take the run without looking at other workers.
 */
export function preferenceLookup(question: PreferenceQuestion): PreferredLabel[] {
  const { spec, capabilities, queuedAt, now, holdMs } = question;
  if (holdMs <= 0 || spec.preferred.length === 0 || now >= queuedAt + holdMs) return [];
  return spec.preferred.filter((p) => !hasLabel(capabilities.labels, p.key, p.value));
}

/**
 * Take or hold (R-PLC-2 in a pull): hold only for a live, online, matching candidate with free
 * capacity and a strictly higher preferred score, and only until `queuedAt + holdMs`. Slots and worker
 * id, the ranking's tie-breakers, never hold a run: among equal scores the first to pull takes it.
 * `candidates` is what the claim could see (the puller itself among them is ignored).
 */
export function decidePreference(
  question: PreferenceQuestion,
  candidates: readonly PlacementCandidate[],
): PreferenceDecision {
  if (preferenceLookup(question).length === 0) return TAKE;
  const others = candidates.filter((c) => c.workerId !== question.workerId);
  const best = rankCandidates(question.spec, others, question.now)[0];
  if (!best || best.score <= placementScore(question.spec, question.capabilities)) return TAKE;
  return { kind: 'hold', workerId: best.workerId, until: question.queuedAt + question.holdMs };
}
