import { IllegalStateError } from '@ql/domain';

/** SPEC §12: 64 records by default, 1024 at most; pages of at most 64. */
export const JOURNAL_LIMITS = { defaultRecords: 64, maxRecords: 1024, maxPage: 64 } as const;

/** R-WRK-2: the states of one accepted offer in the worker's journal. */
export const JOURNAL_STATES = [
  'accepted',
  'starting_acknowledged',
  'launching',
  'started',
  'running_acknowledged',
  'completion_acknowledged',
  'start_failed',
  'recovery_required',
] as const;
export type JournalState = (typeof JOURNAL_STATES)[number];

/**
 * The one transition table of journal records. `start_failed` is final: the run ended without a
 * usable process and the control plane acknowledged it (start-failure, or release before start).
 * `recovery_required` is final too: only an operator may remove such a record.
 */
export const JOURNAL_TRANSITIONS: Readonly<Record<JournalState, readonly JournalState[]>> = {
  accepted: ['starting_acknowledged', 'start_failed', 'recovery_required'],
  starting_acknowledged: ['launching', 'start_failed', 'recovery_required'],
  launching: ['started', 'start_failed', 'recovery_required'],
  // A run that ended before its `running` report: the completion stood in for it (ADR 0047).
  started: ['running_acknowledged', 'completion_acknowledged', 'start_failed', 'recovery_required'],
  running_acknowledged: ['completion_acknowledged', 'recovery_required'],
  completion_acknowledged: [],
  start_failed: [],
  recovery_required: [],
};

/** Records retention may prune: both sides agree the run is over here. */
export const FINISHED_STATES: readonly JournalState[] = ['completion_acknowledged', 'start_failed'];

/** States whose record must carry the launched process (pid, process group). */
export const PROCESS_STATES: readonly JournalState[] = ['started', 'running_acknowledged'];

export function isFinished(state: JournalState): boolean {
  return FINISHED_STATES.includes(state);
}

/** Throws IllegalStateError unless `from → to` is in the journal table. */
export function assertJournalTransition(from: JournalState, to: JournalState): void {
  if (!JOURNAL_TRANSITIONS[from].includes(to)) {
    throw new IllegalStateError(`journal ${from} → ${to} is not allowed`);
  }
}
