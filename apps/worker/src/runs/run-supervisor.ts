import type { OnModuleDestroy } from '@nestjs/common';
import type { SchedulerRegistry } from '@nestjs/schedule';
import { IdGenerator, IllegalStateError } from '@ql/domain';
import { ScheduledLoop } from '@ql/scheduling';
import type { WorkerConfig } from '../config/worker-config';
import { LocalProcessExecutor } from '../executor/local-process.executor';
import { WorkFolders } from '../executor/work-folders';
import { BundleCache } from '../bundles/bundle-cache';
import { WorkerJournal } from '../journal/worker-journal';
import { RepeatedFailureLog } from '../logging/repeated-failure';
import type { WorkerLog } from '../logging/worker-log';
import { AttemptRunner } from './attempt-runner';
import {
  LeaseChannel,
  describeError,
  isRateLimited,
  isSessionFenced,
  pause,
  retryAfterOf,
} from './lease-channel';
import { LeaseRenewer } from './lease-renewer';
import { OfferPuller } from './offer-puller';
import { recoverJournal } from './restart-recovery';
import { WORKER_CLOSING } from './attempt-outcome';

/** Pause before a lease call that got no answer is sent again (inside its lease term). */
export const LEASE_CALL_RETRY_MS = 500;

/** What the lifecycle drives; `RunSupervisor` in the worker, absent where runs are not wanted. */
export interface WorkerRuns {
  /** Single ownership of the journal (R-WRK-1); before the session is registered. */
  open(): Promise<void>;
  /** The restart scan with its prescribed actions, before the first pull; false: do not pull. */
  recover(channel: LeaseChannel): Promise<boolean>;
  /** Journal records in `recovery_required` now (heartbeats carry it, ADR 0029). */
  readonly recoveryRequired: number;
  startPulling(channel: LeaseChannel): void;
  /** No pull starts after this; the one in flight is aborted. */
  stopPulling(): Promise<void>;
  readonly localRuns: number;
  /** Resolves once no run is held here any more (completions reported or given up). */
  whenIdle(): Promise<void>;
  /** R-RUN-5: cancel intents from a heartbeat answer. */
  cancelAttempts(attemptIds: readonly string[]): void;
  /**
   * The stop cannot wait for the runs still going (issue 29 item 4): each is killed (SIGTERM, SIGKILL
   * after `graceMs`) and reported `cancelled` because its worker stopped; resolves with how many.
   */
  cancelForStop(graceMs: number): number;
  /** Kills every local run's process group, reports nothing more; resolves with how many. */
  abandonAll(reason: string): Promise<number>;
  /** Loops stopped, runs killed, journal released. */
  close(): Promise<void>;
}

/**
 * The headless worker's runs (R-WRK-1..5): the restart scan, one pull loop (one offer per tick, only
 * with a free slot; a tick comes at once when a slot frees, else every pull interval), an `AttemptRunner` per accepted offer, and the one renewal loop for all held
 * leases. Every call goes through the lifecycle's serialized chain (`LeaseChannel`). The constructor
 * builds nothing: loops, files and processes come from the lifecycle's `start()` (R-PROF-3).
 */
export class RunSupervisor implements WorkerRuns, OnModuleDestroy {
  private readonly runs = new Map<string, { runner: AttemptRunner; done: Promise<void> }>();
  private pullLoop: ScheduledLoop | undefined;
  private renewer: LeaseRenewer | undefined;
  private puller: OfferPuller | undefined;
  private pulling = false;
  /** `pull failed`, then summaries with growing spacing, then `pull recovered` (issue 16 item 11). */
  private readonly pullFailures: RepeatedFailureLog;
  /** Removes finished attempts' work folders; keeps failed ones within the bound (ADR 0038). */
  private readonly folders: WorkFolders;
  /** Unpacked script bundles by digest, within QL_WORKER_BUNDLE_CACHE_MB (ADR 0051). */
  readonly bundles: BundleCache;
  private readonly pullAbort = new AbortController();
  /** Everything else: aborted when the worker gives up on its runs (fence, budget, close). */
  private readonly abort = new AbortController();

  constructor(
    private readonly config: WorkerConfig,
    private readonly journal: WorkerJournal,
    private readonly executor: LocalProcessExecutor,
    private readonly log: WorkerLog,
    private readonly ids: IdGenerator,
    /** Present only in the `worker` profile's module graph, like the lifecycle's. */
    private readonly scheduler: SchedulerRegistry | undefined,
    /** Tests shorten the pause between retries of a call that got no answer. */
    private readonly retryMs: number = LEASE_CALL_RETRY_MS,
  ) {
    this.pullFailures = new RepeatedFailureLog(log, 'pull');
    this.folders = new WorkFolders(
      {
        root: config.workDir,
        keepFailedRuns: config.keepFailedRuns,
        keepFailedBytes: config.keepFailedBytes,
      },
      log,
    );
    this.bundles = new BundleCache(
      { root: config.bundleCacheDir, capBytes: config.bundleCacheMb * 1024 * 1024 },
      log,
    );
  }

  get localRuns(): number {
    return this.runs.size;
  }

  get recoveryRequired(): number {
    return this.journal.isOpen ? this.journal.countInState('recovery_required') : 0;
  }

  open(): Promise<void> {
    return this.journal.open();
  }

  async recover(channel: LeaseChannel): Promise<boolean> {
    const containment = this.executor.containment();
    const result = await recoverJournal({
      channel,
      journal: this.journal,
      log: this.log,
      killGraceMs: this.config.killGraceMs,
      retryMs: this.retryMs,
      signal: this.abort.signal,
      ...(containment.kind === 'cgroup' ? { cgroups: containment.cgroups } : {}),
    });
    // Folders of attempts a previous process finished (or finished just now, in the scan) go too.
    await this.folders
      .sweep(this.journal)
      .catch((error: unknown) => this.log.warn('could not sweep the work folders', { error: String(error) }));
    this.log.info('journal scanned', {
      records: result.records,
      recoveryRequired: this.recoveryRequired,
      pulling: result.recoveryRequired === null,
      ...(result.recoveryRequired ?? {}),
    });
    return result.recoveryRequired === null;
  }

  startPulling(channel: LeaseChannel): void {
    if (!this.scheduler) throw new IllegalStateError('runs start only in the worker profile');
    this.renewer ??= new LeaseRenewer(channel, this.scheduler, this.log, this.abort.signal);
    this.puller ??= new OfferPuller(channel, this.ids);
    this.pulling = true;
    this.pullLoop ??= new ScheduledLoop(
      this.scheduler,
      'worker-pull',
      this.config.pullIntervalMs,
      () => this.pullCycle(channel),
      { warn: (m) => this.log.warn('pull loop', { detail: String(m) }) },
    );
    this.pullLoop.start();
    this.pullLoop.runSoon(); // the first pull right after the restart scan, not one interval later
  }

  async stopPulling(): Promise<void> {
    this.pulling = false;
    this.pullAbort.abort();
    await this.pullLoop?.stop();
  }

  async whenIdle(): Promise<void> {
    while (this.runs.size > 0) await Promise.all([...this.runs.values()].map((r) => r.done));
  }

  cancelAttempts(attemptIds: readonly string[]): void {
    for (const { runner } of this.runs.values()) {
      if (attemptIds.includes(runner.attemptId)) runner.cancel();
    }
  }

  cancelForStop(graceMs: number): number {
    const held = [...this.runs.values()];
    for (const { runner } of held) runner.cancelForStop(graceMs);
    return held.length;
  }

  async abandonAll(reason: string): Promise<number> {
    const held = [...this.runs.values()];
    for (const { runner } of held) runner.abandon(reason);
    if (held.length) this.log.warn('killing local runs', { count: held.length, reason });
    await Promise.all(held.map((r) => r.done));
    return held.length;
  }

  async close(): Promise<void> {
    await this.stopPulling();
    await this.abandonAll(WORKER_CLOSING);
    if (!this.abort.signal.aborted) this.abort.abort();
    await this.renewer?.stop();
    await this.journal.close();
  }

  onModuleDestroy(): Promise<void> {
    return this.close();
  }

  /** One tick: pull while a slot is free and offers come; an `idle` answer ends the tick. */
  private async pullCycle(channel: LeaseChannel): Promise<void> {
    // A v1 session has no long poll (`waitMs` is v2, ADR 0062): it pulls at each tick, in the chain.
    const pullWaitMs = channel.wireVersion === 1 ? 0 : this.config.pullWaitMs;
    while (this.pulling && this.runs.size < this.config.maxConcurrentRuns) {
      let pulled;
      const sent = Date.now();
      try {
        pulled = await this.puller!.pull(this.pullAbort.signal, pullWaitMs, this.config.requestTimeoutMs);
      } catch (error) {
        // A 429 is the lifecycle's one line per rate-limit burst, not a pull failure of its own.
        if (this.pulling && !isSessionFenced(error) && !isRateLimited(error)) {
          this.pullFailures.failed({
            replaying: this.puller!.replaying ?? undefined,
            ...describeError(error),
          });
        }
        // The answer said when to come back (429, 503): the next pull goes then, not at the next tick.
        const waitMs = retryAfterOf(error);
        if (waitMs === undefined || !this.pulling) return;
        await pause(waitMs, this.pullAbort.signal);
        continue;
      }
      this.pullFailures.succeeded();
      if (pulled === null) {
        // Long poll: the control plane held the pull (it honours waitMs), so the next one goes at once and
        // one pull stays outstanding; an idle answered sooner (draining, full, a plane that caps the wait
        // lower) waits for the next tick instead of spinning (ADR 0019).
        if (pullWaitMs > 0 && Date.now() - sent >= this.config.pullIntervalMs) continue;
        return;
      }
      this.log.info('offer accepted', {
        offerId: pulled.offer.lease.offerId,
        runId: pulled.offer.run.runId,
        attemptId: pulled.offer.run.attemptId,
        attemptNo: pulled.offer.run.attemptNo,
      });
      const runner = new AttemptRunner(
        {
          channel,
          journal: this.journal,
          executor: this.executor,
          renewer: this.renewer!,
          log: this.log,
          signal: this.abort.signal,
          retryMs: this.retryMs,
          killGraceMs: this.config.killGraceMs,
          logLingerMs: this.config.logLingerMs,
          runningReportDelayMs: this.config.runningReportDelayMs,
          folders: this.folders,
          bundles: this.bundles,
        },
        pulled.offer,
        pulled.leaseToken,
      );
      const offerId = runner.lease.offerId;
      const done = runner.run().finally(() => {
        this.runs.delete(offerId);
        // A slot is free: pull now, not after the interval (one worker would drain ~1 run per interval).
        if (this.pulling) this.pullLoop?.runSoon();
      });
      this.runs.set(offerId, { runner, done });
    }
  }
}
