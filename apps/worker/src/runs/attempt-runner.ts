// Size: one attempt from accepted to acknowledged completion — every step, the bundle it runs in (ADR 0051), its
// lease enforcement and its refusals — kept in one class so the order of the steps reads top to bottom.
import {
  ActivationContractError,
  ExecutionOffer,
  RunActivationResponse,
  parseActivationResponse,
} from '@ql/contracts';
import type { FinalLogChunk, TaskBundle } from '@ql/domain';
import { BundleCache, BundleUnavailableError, BundleUse } from '../bundles/bundle-cache';
import { readRelease } from './lease-answers';
import {
  LaunchRequest,
  LocalProcessExecutor,
  LocalRun,
  ProcessOutcome,
} from '../executor/local-process.executor';
import { StartFailedError } from '../executor/start-failed-error';
import type { WorkFolders } from '../executor/work-folders';
import { RecordedOutcome, executorHandleOf } from '../journal/journal-record';
import type { WorkerJournal } from '../journal/worker-journal';
import type { WorkerLog } from '../logging/worker-log';
import {
  HeldLease,
  LeaseChannel,
  callInTerm,
  describeError,
  isLeaseFenced,
  isSessionFenced,
  leaseFence,
} from './lease-channel';
import type { LeaseRenewer } from './lease-renewer';
import { LogUploader } from './log-uploader';
import {
  WORKER_CLOSING,
  WORKER_SHUTDOWN,
  WORKER_STOP_FAILED,
  completionSummary,
  finishLostRecord,
} from './attempt-outcome';
import { fetchSecrets, secretValuesToRedact } from './attempt-secrets';
import { monotonicNow } from '../host/monotonic';
import { linkedSignal } from '../lifecycle/linked-signal';

export interface AttemptDeps {
  readonly channel: LeaseChannel;
  readonly journal: WorkerJournal;
  readonly executor: LocalProcessExecutor;
  readonly renewer: LeaseRenewer;
  readonly log: WorkerLog;
  /** Aborted when the worker gives up on everything (stop budget, fence, module destroy). */
  readonly signal: AbortSignal;
  /** Pause before a lease call that got no answer is sent again (inside the lease term). */
  readonly retryMs: number;
  /** SIGTERM → SIGKILL grace of the executor: kills start this long before the hard stop. */
  readonly killGraceMs: number;
  /** How long output may wait to ride on the completion before it goes as a `logs` call (ADR 0044). */
  readonly logLingerMs?: number;
  /** How long after the spawn `running` waits for the process to end (ADR 0047); absent or 0: not at all. */
  readonly runningReportDelayMs?: number;
  /** The attempt's work folder, once the journal records it finished (ADR 0038); absent: kept. */
  readonly folders?: Pick<WorkFolders, 'settle'>;
  /** Unpacked bundles by digest (ADR 0051); absent: a revision pinning a bundle cannot start here. */
  readonly bundles?: Pick<BundleCache, 'acquire'>;
}

/**
 * Every process of an attempt is dead this long before the worker's bound of its lease end (or of
 * the control plane's deadline sweep): room for the SIGKILL to land and the reaper's `sleep` to
 * wake on a loaded machine (ADR 0028).
 */
export const KILL_MARGIN_MS = 500;

/** The lease is gone (refused, ended by the control plane, or its term passed): no more reports. */
class LeaseLost extends Error {
  constructor(readonly reason: string) {
    super(`lease lost: ${reason}`);
  }
}

/**
 * One accepted offer, from the journal's `accepted` to `completion_acknowledged` (R-WRK-2, R-ACT-1,
 * R-CMP-1): starting → launch → started → running → output as logs → exit → completion, each step
 * journaled after the control plane acknowledged it. A run that ends within the running report's
 * delay, its output fitting on the completion, skips `running`: the completion carries its handle
 * (ADR 0047). Cancel (renew or heartbeat answer) kills the
 * exact process group and the run is reported `cancelled`; a lost lease kills it and reports nothing.
 */
export class AttemptRunner {
  readonly lease: HeldLease;
  private local: LocalRun | undefined;
  private cancelWanted = false;
  /** Why the run is being cancelled: a cancel request, or its worker stopping (issue 29 item 4). */
  private cancelledBy: 'request' | 'worker_stop' | null = null;
  /** Monotonic time a stop that cannot wait for the run has its group SIGKILLed by; none before. */
  private stopKillAtMs = Infinity;
  private lostReason: string | null = null;
  private readonly uploader: LogUploader;
  private readonly ids: Record<string, string>;
  /** Monotonic time the control plane's deadline sweep may end the attempt at (deadline + grace). */
  private sweepAtMs = Infinity;
  private enforceTimer: NodeJS.Timeout | undefined;
  /** The deadline's kill began (renewals re-arm the timer; it is said and done once). */
  private timingOut = false;
  /** SIGTERM comes this long before the hard stop: the configured grace, or less where the term is short. */
  private killGraceMs: number;
  /** The cached bundle this attempt holds (never evicted while it runs), released at its end. */
  private bundleUse: BundleUse | undefined;
  /** Stops this attempt's bundle download when its lease is gone (a stalled answer must not hold it). */
  private readonly stopFetch = new AbortController();

  constructor(
    private readonly deps: AttemptDeps,
    readonly offer: ExecutionOffer,
    leaseToken: string,
  ) {
    this.lease = {
      offerId: offer.lease.offerId,
      leaseToken,
      leaseGeneration: offer.lease.leaseGeneration,
      leaseVersion: offer.lease.version,
      termEndMs: deps.channel.toLocalTime(Date.parse(offer.lease.expiresAt)),
    };
    this.ids = { offerId: this.lease.offerId, runId: offer.run.runId, attemptId: offer.run.attemptId };
    this.killGraceMs = deps.killGraceMs;
    this.uploader = new LogUploader(
      deps.channel,
      this.lease,
      this.term(),
      deps.log,
      this.ids,
      deps.logLingerMs,
    );
  }

  get attemptId(): string {
    return this.offer.run.attemptId;
  }

  /** The attempt's calls go in a v1 session (ADR 0062): `running` always, output only as `logs`. */
  private get v1(): boolean {
    return this.deps.channel.wireVersion === 1;
  }

  /** Stop the run and report it `cancelled` (before launch: a start failure). */
  cancel(): void {
    if (this.cancelWanted) return;
    this.cancelWanted = true;
    this.cancelledBy = 'request';
    this.deps.log.info('cancel requested; killing the run', this.ids);
    this.cancelRun();
  }

  /**
   * The worker is stopping and cannot wait for this run (issue 29 item 4): SIGTERM now, SIGKILL after
   * `graceMs`, and the completion says `cancelled` because its worker stopped (`worker_shutdown`);
   * before the launch, a start failure with that code. A run already being cancelled keeps its reason.
   */
  cancelForStop(graceMs: number): void {
    if (this.lostReason) return; // its lease is gone: nothing is reported any more
    this.stopKillAtMs = Math.min(this.stopKillAtMs, monotonicNow() + graceMs);
    if (!this.cancelWanted) {
      this.cancelWanted = true;
      this.cancelledBy = 'worker_stop';
      const task = this.offer.execution.spec.name;
      this.deps.log.warn(
        `stopping: cancelled run ${this.offer.run.runId} (${task}): it would outlast the worker's stop budget; SIGTERM now, SIGKILL after ${graceMs} ms, reported cancelled (${WORKER_SHUTDOWN})`,
        { ...this.ids, task, graceMs },
      );
      this.cancelRun();
    }
    this.enforce(); // the SIGKILL (and the reaper's switch) at the stop's kill time, if that is sooner
  }

  /** The process group is killed; before the launch, a bundle download in flight ends (nothing will run). */
  private cancelRun(): void {
    if (this.local) this.local.cancel();
    else this.stopFetch.abort();
  }

  /** The start failure a cancel before the launch is reported as. */
  private cancelCode(): string {
    return this.cancelledBy === 'worker_stop' ? WORKER_SHUTDOWN : 'cancel_requested';
  }

  /** The lease is gone or the worker gives up: kill the process group, report nothing more. */
  abandon(reason: string): void {
    clearTimeout(this.enforceTimer);
    if (this.lostReason === null && reason === 'lease_term_ending')
      this.deps.log.error("lease term ending without a renewal: killing the attempt's processes", this.ids);
    this.lostReason ??= reason;
    this.stopFetch.abort();
    this.uploader.stop();
    this.local?.cancel();
  }

  /** Settles when the attempt is over here (its process group gone); never rejects. */
  async run(): Promise<void> {
    try {
      await this.deps.journal.accept({
        offerId: this.lease.offerId,
        runId: this.offer.run.runId,
        attemptId: this.offer.run.attemptId,
        leaseGeneration: this.lease.leaseGeneration,
        leaseToken: this.lease.leaseToken,
        specDigest: this.offer.execution.digest,
      });
    } catch (error) {
      this.deps.log.error('could not journal the offer; releasing its lease', {
        ...this.ids,
        ...describeError(error),
      });
      await this.release().catch(() => undefined);
      return;
    }
    const termMs = this.lease.termEndMs - monotonicNow();
    const fits = Math.max(0, Math.floor(termMs / 2 - KILL_MARGIN_MS));
    if (this.deps.killGraceMs > fits) {
      // Renewed a third into the term, killed a grace and a margin before its end: a longer grace
      // would kill a healthy run before its renewal had a chance. The grace gives way, never the term.
      this.killGraceMs = fits;
      this.deps.log.warn(
        'QL_WORKER_KILL_GRACE_MS does not fit this lease term: SIGTERM comes only this long before SIGKILL for this run; keep it under half the run lease (QL_RUN_LEASE_MS) less 500 ms',
        {
          ...this.ids,
          killGraceMs: this.deps.killGraceMs,
          termMs: Math.round(termMs),
          effectiveGraceMs: fits,
        },
      );
    }
    this.deps.renewer.hold(this.lease, {
      cancelRequested: () => this.cancel(),
      lost: (reason) => this.abandon(reason),
      renewed: () => this.enforce(),
    });
    this.enforce();
    try {
      await this.steps();
    } catch (error) {
      await this.failed(error);
    } finally {
      clearTimeout(this.enforceTimer);
      this.deps.renewer.release(this.lease.offerId);
      this.bundleUse?.release();
    }
    // Its processes are gone; the folder goes only if the journal now says the attempt finished.
    await this.deps.folders?.settle(this.deps.journal, this.lease.offerId).catch(() => undefined);
  }

  /**
   * ADR 0028: the run's processes are dead before the lease term (or the deadline sweep) ends, on
   * this process's monotonic clock, without waiting for any call: the hard stop is that end less
   * a margin; the kill starts a kill grace before it (SIGTERM, then SIGKILL at the hard stop), and
   * the reaper's dead man's switch SIGKILLs the group at the hard stop even if this process is
   * frozen. Re-armed whenever the term or the deadline moves.
   */
  private enforce(): void {
    clearTimeout(this.enforceTimer);
    if (this.lostReason) return;
    const hardStop = Math.min(this.lease.termEndMs, this.sweepAtMs) - KILL_MARGIN_MS;
    // A stop that cannot wait for the run kills it sooner (cancelForStop); the timer below stays the lease's.
    const killBy = Math.min(hardStop, this.stopKillAtMs);
    if (this.local) {
      // Said before it is armed: a worker frozen in between has the switch at this time or earlier.
      const hardStopAt = new Date(Date.now() + killBy - monotonicNow()).toISOString();
      this.deps.log.debug("the attempt's hard stop: the reaper's switch kills it then", {
        ...this.ids,
        hardStopAt,
      });
    }
    this.local?.stopBy(killBy);
    const byDeadline = this.sweepAtMs < this.lease.termEndMs;
    const killAt = hardStop - this.killGraceMs;
    this.enforceTimer = setTimeout(
      () => {
        if (!byDeadline) return this.abandon('lease_term_ending');
        if (!this.local || this.timingOut) return; // not launched yet (the hard stop still holds), or said
        this.timingOut = true;
        this.deps.log.warn("the attempt's deadline sweep is near: killing it (timed out)", this.ids);
        this.local.timeOut();
      },
      Math.max(0, killAt - monotonicNow()),
    );
    this.enforceTimer.unref();
  }

  private async steps(): Promise<void> {
    const { journal, log } = this.deps;
    const offerId = this.lease.offerId;
    const starting = await this.activation('starting', {});
    if (starting.status === 'already_terminal') throw new LeaseLost('attempt_ended');
    this.learnDeadline(starting);
    await journal.transition(offerId, 'starting_acknowledged');
    if (this.cancelWanted) return this.startFailure(this.cancelCode());
    this.checkLease();
    const spec = this.offer.execution.spec;
    let bundle: LaunchRequest['bundle'];
    if (spec.bundle) {
      try {
        bundle = await this.takeBundle(spec.bundle);
      } catch (error) {
        // The lease or the session is gone: nothing more is reported (the fence says why).
        if (this.lostReason || isLeaseFenced(error) || isSessionFenced(error)) throw error;
        if (this.cancelWanted) return this.startFailure(this.cancelCode()); // the cancel ended the download
        return this.startFailure('bundle_unavailable', error);
      }
      this.checkLease();
    }
    // ADR 0050: the values come now, for the child's environment only: never journaled or logged.
    const secrets = await fetchSecrets(this.deps.channel, this.lease, this.term(), this.offer);
    if ('refused' in secrets) return this.startFailure(secrets.refused);
    const secretEnv = secrets.env;
    this.uploader.redact(secretValuesToRedact(spec, secretEnv));
    this.checkLease();
    // Cancelled while its bundle or secrets came: nothing is launched.
    if (this.cancelWanted) return this.startFailure(this.cancelCode());
    await journal.transition(offerId, 'launching');
    let local: LocalRun;
    try {
      local = await this.deps.executor.launch({
        offerId,
        attemptId: this.attemptId,
        runtime: spec.runtime,
        command: spec.command,
        env: { ...spec.env, ...secretEnv },
        timeoutMs: spec.timeoutMs,
        onOutput: (chunk) => this.uploader.push(chunk),
        ...(bundle ? { bundle } : {}),
      });
    } catch (error) {
      return this.startFailure(error instanceof StartFailedError ? error.code : 'spawn_failed', error);
    }
    this.local = local;
    // Once it ended, what is still queued waits for the completion (ADR 0044); this runs before `steps` reads `done`.
    void local.done.then(
      () => this.uploader.hold(),
      () => undefined,
    );
    if (this.cancelWanted || this.lostReason) local.cancel(); // arrived while it was spawning
    this.enforce(); // the group exists now: arm the reaper's switch
    await journal.transition(offerId, 'started', { process: local.process });
    log.info('attempt started', { ...this.ids, pid: local.pid, runtime: spec.runtime });
    const executorHandle = executorHandleOf(local.process);
    // ADR 0047: ended already, all its output fitting on the completion: that one call says both.
    // Not in a v1 session: v1 has no completion standing in for `running` (ADR 0062).
    const early = this.v1 ? null : await this.endedWithin(local);
    if (early) {
      this.checkLease(); // lost meanwhile: its process was killed, and nothing is reported
      const all = this.uploader.takeAll();
      if (all) return this.complete(early, async () => all, executorHandle);
    }
    const running = await this.activation('running', { executorHandle });
    if (running.status === 'already_terminal') throw new LeaseLost('attempt_ended');
    await journal.transition(offerId, 'running_acknowledged');
    this.uploader.start();
    // What is still queued rides on the completion, up to the bound; earlier chunks go as `logs` first.
    // A v1 completion carries no output (no `finalLogs`): every chunk goes as `logs` first.
    return this.complete(await local.done, () => this.uploader.finish(!this.v1));
  }

  /**
   * The process ended: its outcome journaled, then the completion (with `finalLogs` when output
   * rides on it, and `executorHandle` when it stands in for `running`, ADR 0047), then its record.
   */
  private async complete(
    ended: ProcessOutcome,
    lastOutput: () => Promise<FinalLogChunk[]>,
    executorHandle?: string,
  ): Promise<void> {
    const { journal, log } = this.deps;
    const offerId = this.lease.offerId;
    // A run its worker's stop cancelled says so in the journal too: a restart reports it with that code.
    const stopped = ended.status === 'cancelled' && this.cancelledBy === 'worker_stop';
    const outcome = recordedOutcome(ended, stopped ? WORKER_SHUTDOWN : null);
    await journal.update(offerId, { exit: { code: ended.exitCode, signal: ended.signal }, outcome });
    this.checkLease();
    const finalLogs = await lastOutput();
    this.checkLease();
    await this.activation('completion', {
      outcome: outcome.status,
      exitCode: outcome.exitCode,
      errorSummary: completionSummary(ended, this.offer.execution.spec.timeoutMs, this.cancelledBy),
      ...(executorHandle === undefined ? {} : { executorHandle }),
      ...(finalLogs.length > 0 ? { finalLogs } : {}),
    });
    await journal.transition(offerId, 'completion_acknowledged');
    log.info('attempt completed', {
      ...this.ids,
      outcome: outcome.status,
      exitCode: outcome.exitCode,
      logChunks: this.uploader.uploaded + finalLogs.length,
      finalLogChunks: finalLogs.length,
      runningReported: executorHandle === undefined,
      ...ended.usage, // cpuUsec, memoryPeakBytes: from the attempt's cgroup (ADR 0030)
    });
  }

  /**
   * ADR 0047: the process's end if it comes within `runningReportDelayMs` of the spawn, else null.
   * A cancel, the deadline or a lost lease meanwhile kill it as at any other time (their end may then
   * come within the wait, and is reported as it would have been after `running`).
   */
  private async endedWithin(local: LocalRun): Promise<ProcessOutcome | null> {
    const delayMs = this.deps.runningReportDelayMs ?? 0;
    if (delayMs <= 0) return null;
    let timer: NodeJS.Timeout | undefined;
    const waited = new Promise<null>((resolve) => {
      timer = setTimeout(resolve, delayMs, null);
      timer.unref();
    });
    try {
      return await Promise.race([local.done.catch(() => null), waited]);
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * ADR 0051: the pinned bundle from the cache, or fetched over the fenced `bundle` call (in the
   * session's call chain, with this lease's fence) on a miss; held until the attempt ends.
   */
  private async takeBundle(pinned: TaskBundle): Promise<LaunchRequest['bundle']> {
    const { bundles, channel, signal } = this.deps;
    if (!bundles || !channel.leaseDownload)
      throw new BundleUnavailableError('no_cache', 'this worker has no bundle cache');
    const download = channel.leaseDownload.bind(channel);
    const stop = linkedSignal(signal, this.stopFetch.signal); // ADR 0049: unlinked once settled
    let use: BundleUse;
    try {
      use = await bundles.acquire(pinned.digest, (maxBytes) =>
        download(() => ({ ...leaseFence(this.lease), digest: pinned.digest }), {
          signal: stop.signal,
          maxBytes,
        }),
      );
    } finally {
      stop.unlink();
    }
    this.bundleUse = use;
    this.deps.log.info(use.downloaded ? 'bundle fetched for the attempt' : 'bundle taken from the cache', {
      ...this.ids,
      digest: pinned.digest,
    });
    return { dir: use.dir, workdir: pinned.workdir, copyTo: (dest) => use.copyTo(dest) };
  }

  private async startFailure(errorCode: string, cause?: unknown): Promise<void> {
    this.deps.log.warn('attempt could not start', {
      ...this.ids,
      errorCode,
      ...(cause ? describeError(cause) : {}),
    });
    await this.activation('start-failure', { errorCode });
    await this.deps.journal.transition(this.lease.offerId, 'start_failed');
  }

  private async failed(error: unknown): Promise<void> {
    const lost =
      error instanceof LeaseLost
        ? error.reason
        : isLeaseFenced(error)
          ? (error.reason ?? error.code)
          : this.lostReason;
    this.abandon(lost ?? 'worker_gave_up');
    const outcome = await this.local?.done;
    if (lost === WORKER_STOP_FAILED || lost === WORKER_CLOSING) {
      // The worker gave up on it, not the control plane: its lease may well be live. The journal keeps
      // the record as it is; the next start on this journal reports it (R-WRK-2, ADR 0011).
      this.deps.log.warn(
        "attempt killed before its completion was acknowledged: the worker's stop ran out of time; the next start on this journal reports it",
        { ...this.ids, reason: lost },
      );
      return;
    }
    if (lost !== null) {
      this.deps.log.warn('attempt ended without a completion: its lease is gone', {
        ...this.ids,
        reason: lost,
      });
      await finishLostRecord(this.deps.journal, this.lease.offerId, outcome).catch((e: unknown) =>
        this.deps.log.error('could not journal the lost lease', { ...this.ids, ...describeError(e) }),
      );
      return;
    }
    // Aborted or fenced: the journal keeps the record as it is; the next start handles it (R-WRK-2).
    const level = this.deps.signal.aborted ? 'warn' : 'error';
    this.deps.log[level]('attempt stopped before its completion was acknowledged', {
      ...this.ids,
      ...describeError(error),
    });
  }

  /** The control plane sweeps the attempt at deadline + grace (both in the `starting` answer). */
  private learnDeadline(answer: RunActivationResponse): void {
    const { deadlineAt, deadlineGraceMs } = answer.snapshot;
    if (deadlineAt === undefined) return;
    this.sweepAtMs = this.deps.channel.toLocalTime(Date.parse(deadlineAt)) + (deadlineGraceMs ?? 0);
    this.enforce();
  }

  private checkLease(): void {
    if (this.lostReason) throw new LeaseLost(this.lostReason);
  }

  private async activation(
    action: 'starting' | 'running' | 'start-failure' | 'completion',
    extra: Record<string, unknown>,
  ): Promise<RunActivationResponse> {
    const answer = (await callInTerm(this.deps.channel, action, this.lease, extra, {
      ...this.term(),
      parse: parseActivationResponse, // the contract's one strict parser, on the answer's bytes (R-ACT-3)
    })) as RunActivationResponse;
    if (answer.snapshot.attemptId !== this.attemptId)
      throw new ActivationContractError('snapshot.attemptId:other_attempt');
    return answer;
  }

  private release() {
    return callInTerm(this.deps.channel, 'release', this.lease, {}, { ...this.term(), parse: readRelease });
  }

  private term() {
    return { retryMs: this.deps.retryMs, signal: this.deps.signal };
  }
}

function recordedOutcome(ended: ProcessOutcome, errorCode: string | null): RecordedOutcome {
  return { status: ended.status, exitCode: ended.exitCode, errorCode };
}
