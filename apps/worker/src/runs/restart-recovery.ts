import { parseActivationResponse } from '@ql/contracts';
import { monotonicNow } from '../host/monotonic';
import { killLeftoverCgroup, killLeftoverGroup, sweepLeftoverCgroups } from '../executor/leftover-group';
import type { RunCgroups } from '../host/cgroup';
import type { JournalRecord } from '../journal/journal-record';
import { RestartAction } from '../journal/restart-action';
import { RestartItem, RestartScan } from '../journal/restart-scan';
import type { WorkerJournal } from '../journal/worker-journal';
import type { WorkerLog } from '../logging/worker-log';
import { finishLostRecord } from './attempt-outcome';
import { readRelease } from './lease-answers';
import {
  HeldLease,
  LeaseAction,
  LeaseChannel,
  callInTerm,
  describeError,
  isLeaseFenced,
} from './lease-channel';

export interface RecoveryDeps {
  readonly channel: LeaseChannel;
  readonly journal: WorkerJournal;
  readonly log: WorkerLog;
  readonly killGraceMs: number;
  readonly retryMs: number;
  readonly signal: AbortSignal;
  /** Where attempt cgroups live (ADR 0030), if runs are contained by cgroup here. */
  readonly cgroups?: RunCgroups;
}

export interface RecoveryResult {
  readonly records: number;
  /** Set when a record is (or became) `recovery_required`: the worker must not pull (R-WRK-1). */
  readonly recoveryRequired: { readonly offerId: string; readonly reason: string } | null;
}

/** A call that got no answer is tried this many times at restart, then the start fails. */
const RESTART_TRIES = 3;

/**
 * R-WRK-1/-2 at start, before the first pull: the journal scanned in pages of ≤ 64, ≤ 16 records per
 * tick, each record given what `restartAction` prescribes. A leftover process group is killed (once
 * proven ours) before the report. The new session sends the report with the predecessor's token, which
 * the control plane accepts from this worker's successor session (ADR 0015); a lease already ended
 * (expired, swept) refuses it. Either way the record is finished here and never handled twice.
 */
export async function recoverJournal(
  deps: RecoveryDeps,
  scan = new RestartScan(deps.journal),
): Promise<RecoveryResult> {
  let records = 0;
  let recoveryRequired: RecoveryResult['recoveryRequired'] = null;
  while (!scan.done) {
    for (const item of await scan.tick()) {
      records++;
      const reason = await handle(deps, item);
      if (reason !== null) recoveryRequired ??= { offerId: item.record.offerId, reason };
    }
  }
  if (deps.cgroups)
    for (const { attemptId, verdict } of await sweepLeftoverCgroups(deps.cgroups, deps.killGraceMs))
      deps.log[verdict === 'stuck' ? 'warn' : 'info']("a predecessor's attempt cgroup, swept at start", {
        attemptId,
        verdict,
      });
  await deps.journal.prune();
  return { records, recoveryRequired };
}

/** One record; returns the recovery reason when the worker must stop pulling. */
async function handle(deps: RecoveryDeps, { record, action }: RestartItem): Promise<string | null> {
  const ids = {
    offerId: record.offerId,
    runId: record.runId,
    attemptId: record.attemptId,
    state: record.state,
  };
  if ('killGroup' in action && action.killGroup) {
    if (deps.cgroups) {
      // The attempt's cgroup is proof by itself: a task cannot leave it (not by `setsid`, not by
      // `exec env -i`), so whatever is in it is this attempt's and is killed (ADR 0030).
      const cgroup = await killLeftoverCgroup(deps.cgroups, record.attemptId, deps.killGraceMs);
      deps.log.info("leftover cgroup of a crashed predecessor's attempt", { ...ids, verdict: cgroup });
    }
    const verdict = await killLeftoverGroup(action.killGroup, record.attemptId, deps.killGraceMs);
    const proven = verdict === 'gone' || verdict === 'killed';
    deps.log[proven ? 'info' : 'warn']('leftover process group of a crashed predecessor', {
      ...ids,
      pgid: action.killGroup.pgid,
      verdict,
    });
    if (!proven) {
      // The group lives and cannot be proven this attempt's (a task that ran `exec env -i …` drops the
      // marker; no /proc to read it): reporting the attempt ended would let its retry run beside it.
      // Fail closed: no report, the record waits for an operator (`journal` command, ADR 0029).
      const reason = `leftover_group_${verdict}`;
      await deps.journal.transition(record.offerId, 'recovery_required', { recoveryReason: reason });
      return stopPulling(deps, ids, reason);
    }
  }
  switch (action.kind) {
    case 'prune':
      return null;
    case 'mark_recovery_required':
      await deps.journal.transition(record.offerId, 'recovery_required', { recoveryReason: action.reason });
      return stopPulling(deps, ids, action.reason);
    case 'stop_pulling':
      return stopPulling(deps, ids, action.reason);
    default:
      await report(deps, record, action);
      return null;
  }
}

function stopPulling(deps: RecoveryDeps, ids: Record<string, string>, reason: string): string {
  deps.log.error('journal record needs recovery: this worker does not pull until an operator clears it', {
    ...ids,
    reason,
  });
  return reason;
}

type ReportAction = Extract<
  RestartAction,
  { kind: 'release' | 'report_start_failure' | 'report_completion' }
>;

/** Sends the prescribed report; acknowledged or refused for good, the record is finished. */
async function report(deps: RecoveryDeps, record: JournalRecord, action: ReportAction): Promise<void> {
  const ids = { offerId: record.offerId, state: record.state, action: action.kind };
  // A v1 session has no completion standing in for `running` (ADR 0062): `running` goes first.
  const runningFirst =
    action.kind === 'report_completion' && action.executorHandle !== null && deps.channel.wireVersion === 1;
  const [call, extra, parse] = restartCall(runningFirst ? { ...action, executorHandle: null } : action);
  let acknowledged = false;
  if (record.leaseToken !== null) {
    // The lease version is not journaled (it moves at every renewal); the lease identity decides first.
    const lease: HeldLease = {
      offerId: record.offerId,
      leaseToken: record.leaseToken,
      leaseGeneration: record.leaseGeneration,
      leaseVersion: 0,
      termEndMs: monotonicNow() + RESTART_TRIES * deps.retryMs,
    };
    try {
      if (runningFirst)
        await callInTerm(
          deps.channel,
          'running',
          lease,
          { executorHandle: (action as { executorHandle: string }).executorHandle },
          { retryMs: deps.retryMs, signal: deps.signal, parse: parseActivationResponse },
        );
      await callInTerm(deps.channel, call, lease, extra, {
        retryMs: deps.retryMs,
        signal: deps.signal,
        parse,
      });
      acknowledged = true;
    } catch (error) {
      if (!isLeaseFenced(error)) throw error;
      deps.log.info('restart report refused: the lease already ended', {
        ...ids,
        ...describeError(error),
      });
    }
  }
  if (!acknowledged) {
    await finishLostRecord(deps.journal, record.offerId);
  } else if (action.kind === 'report_completion') {
    await deps.journal.transition(record.offerId, 'completion_acknowledged', { outcome: action.outcome });
  } else {
    await deps.journal.transition(record.offerId, 'start_failed');
  }
  if (acknowledged) deps.log.info('restart report acknowledged', ids);
}

/** The call, its body and the strict parser of its answer. */
function restartCall(
  action: ReportAction,
): [LeaseAction, Record<string, unknown>, (bytes: Buffer) => unknown] {
  switch (action.kind) {
    case 'release':
      return ['release', {}, readRelease];
    case 'report_start_failure':
      return ['start-failure', { errorCode: action.errorCode }, parseActivationResponse];
    case 'report_completion':
      return [
        'completion',
        {
          outcome: action.outcome.status,
          exitCode: action.outcome.exitCode,
          errorSummary: action.outcome.errorCode
            ? `reported after a worker restart (${action.outcome.errorCode})`
            : null,
          ...(action.executorHandle === null ? {} : { executorHandle: action.executorHandle }),
        },
        parseActivationResponse,
      ];
  }
}
