import type { SchedulerRegistry } from '@nestjs/schedule';
import type { RenewResponse } from '@ql/contracts';
import { ScheduledLoop } from '@ql/scheduling';
import { monotonicNow } from '../host/monotonic';
import { RepeatedFailureLog } from '../logging/repeated-failure';
import type { WorkerLog } from '../logging/worker-log';
import {
  HeldLease,
  LeaseChannel,
  describeError,
  isLeaseFenced,
  isRateLimited,
  isSessionFenced,
  leaseFence,
  retryAfterOf,
} from './lease-channel';
import { readRenew } from './lease-answers';

/** Renewal is due once this share of the remaining term has passed (a third: two more tries fit). */
export const RENEW_AT_SHARE = 1 / 3;
/** How often the one renewal loop looks for due leases while any is held. */
export const RENEW_TICK_MS = 250;

/** What the renewer tells the run that holds a lease. */
export interface LeaseHandlers {
  /** The renew answer carried `cancelRequested: true` (R-RUN-5). */
  cancelRequested(): void;
  /** The lease is gone: refused (409) or its term ended without a renewal. Kill, never complete. */
  lost(reason: string): void;
  /** A renewal moved the term (`lease.termEndMs`): the run moves its kill times with it (ADR 0028). */
  renewed(): void;
}

interface Held {
  readonly lease: HeldLease;
  readonly handlers: LeaseHandlers;
  renewAtMs: number;
  /** A renewal of this lease is in the call chain: the next is not queued behind it. */
  renewing: boolean;
}

/** The monotonic time a lease ending at `termEndMs` is renewed at: a third into what is left of it. */
export function renewalDue(nowMs: number, termEndMs: number): number {
  return nowMs + Math.max(0, termEndMs - nowMs) * RENEW_AT_SHARE;
}

/**
 * R-WRK-4: ONE unref'd renewal loop for every lease the worker holds, armed only while it holds one.
 * Each lease is renewed a third into its remaining term; a renewal that got no answer is tried again
 * on the next tick, but only while the term lasts. A tick never waits for a renewal's answer: one
 * lease's hung call does not hold back another's renewal. Ending the run when the term runs out is
 * not this loop's job — it would wait for calls — but the run's own timers' (AttemptRunner, ADR 0028).
 */
export class LeaseRenewer {
  private readonly held = new Map<string, Held>();
  private loop: ScheduledLoop | undefined;
  /** One line per outage for every lease together, then summaries (ADR 0038), not one per 250 ms tick. */
  private readonly failures: RepeatedFailureLog;

  constructor(
    private readonly channel: LeaseChannel,
    private readonly scheduler: SchedulerRegistry,
    private readonly log: WorkerLog,
    private readonly signal: AbortSignal,
    private readonly tickMs: number = RENEW_TICK_MS,
    private readonly now: () => number = monotonicNow,
  ) {
    this.failures = new RepeatedFailureLog(log, 'lease renewal');
  }

  get size(): number {
    return this.held.size;
  }

  hold(lease: HeldLease, handlers: LeaseHandlers): void {
    this.held.set(lease.offerId, {
      lease,
      handlers,
      renewAtMs: renewalDue(this.now(), lease.termEndMs),
      renewing: false,
    });
    this.loop ??= new ScheduledLoop(
      this.scheduler,
      'worker-lease-renewal',
      this.tickMs,
      async () => this.cycle(),
      {
        warn: (m) => this.log.warn('lease renewal loop', { detail: String(m) }),
      },
    );
    this.loop.start();
  }

  /** The run is over here: no more renewals of its lease; the loop stops with the last lease. */
  release(offerId: string): void {
    this.held.delete(offerId);
    if (this.held.size === 0) void this.loop?.stop();
  }

  async stop(): Promise<void> {
    this.held.clear();
    await this.loop?.stop();
  }

  private cycle(): void {
    for (const held of this.held.values()) {
      if (this.signal.aborted) return;
      if (!held.renewing && this.now() >= held.renewAtMs) {
        held.renewing = true;
        void this.renew(held).finally(() => (held.renewing = false));
      }
    }
  }

  private async renew(held: Held): Promise<void> {
    const { lease, handlers } = held;
    if (this.now() >= lease.termEndMs) return this.lose(held, 'lease_term_ended');
    let cancelRequested = false;
    try {
      const body = () => {
        // Checked again when the call's turn in the chain comes: never sent past the term.
        if (this.now() >= lease.termEndMs) throw new Error('lease term ended');
        return leaseFence(lease);
      };
      await this.channel.leaseCall('renew', body, {
        signal: this.signal,
        parse: readRenew,
        onAnswer: (answer) => {
          // Applied in the chain's turn: the next lease call is built with the new version.
          const renewed = answer as RenewResponse;
          lease.leaseVersion = renewed.lease.version;
          lease.termEndMs = this.channel.toLocalTime(Date.parse(renewed.lease.expiresAt));
          cancelRequested = renewed.cancelRequested;
        },
      });
      if (this.held.get(lease.offerId) !== held) return; // released or lost meanwhile
      held.renewAtMs = renewalDue(this.now(), lease.termEndMs);
      handlers.renewed();
      this.failures.succeeded({ offerId: lease.offerId });
      this.log.debug('lease renewed', { offerId: lease.offerId, leaseVersion: lease.leaseVersion });
      if (cancelRequested) handlers.cancelRequested();
    } catch (error) {
      if (this.signal.aborted || isSessionFenced(error)) return; // the lifecycle ends everything
      if (!isLeaseFenced(error) && this.now() < lease.termEndMs) {
        // Still due: the next tick tries again, or the first one after the answer's Retry-After.
        const waitMs = retryAfterOf(error);
        if (waitMs !== undefined) held.renewAtMs = this.now() + waitMs;
        if (isRateLimited(error)) return; // the lifecycle logs the rate-limit burst once
        this.failures.failed({
          offerId: lease.offerId,
          retry: 'inside its term',
          ...describeError(error),
        });
        return;
      }
      this.lose(held, isLeaseFenced(error) ? (error.reason ?? error.code) : 'lease_term_ended', error);
    }
  }

  private lose(held: Held, reason: string, error?: unknown): void {
    if (this.held.get(held.lease.offerId) !== held) return; // released (run over) or lost already
    this.release(held.lease.offerId);
    this.log.error('lease lost; its run is killed and not completed', {
      offerId: held.lease.offerId,
      reason,
      ...(error ? describeError(error) : {}),
    });
    held.handlers.lost(reason);
  }
}
