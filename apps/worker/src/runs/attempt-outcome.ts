import type { ProcessOutcome } from '../executor/local-process.executor';
import type { JournalRecord, RecordedOutcome } from '../journal/journal-record';
import type { WorkerJournal } from '../journal/worker-journal';

/** The completion's `errorSummary` cap (ACTIVATION_LIMITS.errorSummaryBytes); ours stay far below. */
const SUMMARY_MAX_CHARS = 512;

/** The error code a record gets when its lease ended without the worker's own report. */
export const LEASE_LOST = 'lease_lost';

/**
 * The reason code of a run its worker's stop cancelled (issue 29 item 4): a start failure's
 * `errorCode`, and named in a completion's summary. A wire value: never rename it.
 */
export const WORKER_SHUTDOWN = 'worker_shutdown';

/** Why a run is killed when the worker gives up on it itself: its stop ran out of budget, or it closes. */
export const WORKER_STOP_FAILED = 'worker_stop_failed';
export const WORKER_CLOSING = 'worker_closing';

/** A short, bounded, human summary of how the process ended; null for a success. */
export function completionSummary(
  ended: ProcessOutcome,
  timeoutMs: number,
  cancelledBy: 'request' | 'worker_stop' | null,
): string | null {
  const parts: string[] = [];
  if (ended.status === 'timed_out') parts.push(`killed after its ${timeoutMs} ms timeout`);
  else if (ended.status === 'cancelled' && cancelledBy === 'worker_stop')
    parts.push(`killed because its worker was stopped before the run ended (${WORKER_SHUTDOWN})`);
  else if (ended.status === 'cancelled') parts.push('killed on a cancel request');
  else if (ended.status === 'failed')
    parts.push(
      ended.exitCode !== null
        ? `exited with code ${ended.exitCode}`
        : `ended by ${ended.signal ?? 'a signal'}`,
    );
  if (ended.droppedBytes > 0) parts.push(`${ended.droppedBytes} bytes of output past the cap were dropped`);
  if (!ended.groupCleared) parts.push('a process of its group survived SIGKILL');
  return parts.length ? parts.join('; ').slice(0, SUMMARY_MAX_CHARS) : null;
}

/**
 * Finishes the record of an attempt whose lease is gone (refused, or ended by the control plane):
 * before `running_acknowledged` it is `start_failed`, after it — or once the outcome of a run that
 * ended before its `running` report is recorded (ADR 0047) — `completion_acknowledged` with the
 * process's end (or `failed`) and the error code `lease_lost`. The control plane already decided the
 * attempt; finishing the record drops the token and lets retention prune it.
 */
export async function finishLostRecord(
  journal: WorkerJournal,
  offerId: string,
  ended?: ProcessOutcome,
): Promise<JournalRecord | null> {
  const record = await journal.get(offerId);
  if (record === null || record.state === 'completion_acknowledged' || record.state === 'start_failed')
    return record;
  if (record.state === 'recovery_required') return record; // only an operator clears it
  const ran =
    record.state === 'running_acknowledged' || (record.state === 'started' && record.outcome !== null);
  if (!ran) return journal.transition(offerId, 'start_failed');
  const outcome: RecordedOutcome = {
    status: record.outcome?.status ?? ended?.status ?? 'failed',
    exitCode: record.outcome?.exitCode ?? ended?.exitCode ?? null,
    errorCode: LEASE_LOST,
  };
  return journal.transition(offerId, 'completion_acknowledged', { outcome });
}
