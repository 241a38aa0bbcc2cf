import { JournalRecord, RecordedOutcome, RecordedProcess, executorHandleOf } from './journal-record';

/** The error code the worker reports for an attempt its own restart cut short. */
export const WORKER_RESTARTED = 'worker_restarted';

/**
 * What R-WRK-2 prescribes for a record found at restart. `killGroup` names the leftover process
 * group of the crashed predecessor, to be killed (after verifying it is ours) before reporting.
 */
export type RestartAction =
  /** Claimed, nothing acknowledged: give the attempt back to the queue (R-LSE-5). */
  | { readonly kind: 'release' }
  | {
      readonly kind: 'report_start_failure';
      readonly killGroup: RecordedProcess | null;
      readonly errorCode: string;
    }
  | {
      readonly kind: 'report_completion';
      readonly killGroup: RecordedProcess | null;
      readonly outcome: RecordedOutcome;
      /** Set when `running` was never reported: the completion carries its handle (ADR 0047). */
      readonly executorHandle: string | null;
    }
  /** A spawn may or may not have happened: never re-spawn; the record becomes recovery_required. */
  | { readonly kind: 'mark_recovery_required'; readonly reason: string }
  /** Already recovery_required: the worker must not pull (R-WRK-1). */
  | { readonly kind: 'stop_pulling'; readonly reason: string }
  /** Finished on both sides: nothing to do; retention may remove it. */
  | { readonly kind: 'prune' };

/** Pure: the restart decision for one record, from its state and what it recorded. */
export function restartAction(record: JournalRecord): RestartAction {
  const leftover = record.exit === null ? record.process : null;
  switch (record.state) {
    case 'accepted':
      return { kind: 'release' };
    case 'starting_acknowledged':
      return { kind: 'report_start_failure', killGroup: null, errorCode: WORKER_RESTARTED };
    case 'launching':
      return { kind: 'mark_recovery_required', reason: 'launch_interrupted' };
    case 'started':
      // The process ended before its `running` report and the outcome is recorded: the completion
      // that stood in for `running` is reported, with its handle (ADR 0047).
      if (record.outcome !== null && record.process !== null)
        return {
          kind: 'report_completion',
          killGroup: null,
          outcome: record.outcome,
          executorHandle: executorHandleOf(record.process),
        };
      return { kind: 'report_start_failure', killGroup: leftover, errorCode: WORKER_RESTARTED };
    case 'running_acknowledged':
      return {
        kind: 'report_completion',
        killGroup: record.outcome === null ? leftover : null,
        outcome: record.outcome ?? { status: 'failed', exitCode: null, errorCode: WORKER_RESTARTED },
        executorHandle: null,
      };
    case 'recovery_required':
      return { kind: 'stop_pulling', reason: record.recoveryReason ?? 'unknown' };
    case 'completion_acknowledged':
    case 'start_failed':
      return { kind: 'prune' };
  }
}
