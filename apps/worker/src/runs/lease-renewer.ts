import type { SchedulerRegistry } from '@nestjs/schedule';
import { parseLeaseAnswer } from '@ql/contracts';
import { ScheduledLoop } from '@ql/scheduling';
import type { WorkerLog } from '../logging/worker-log';
import {
  HeldLease,
  LeaseChannel,
  describeError,
  isLeaseFenced,
  isSessionFenced,
  leaseFence,
} from './lease-channel';

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
}

interface Held {
  readonly lease: HeldLease;
  readonly handlers: LeaseHandlers;
  renewAtMs: number;
}

/** The local time a lease with this expiry is renewed at: a third into what is left of its term. */
export function renewalDue(nowMs: number, expiresAtMs: number): number {
  return nowMs + Math.max(0, expiresAtMs - nowMs) * RENEW_AT_SHARE;
}

/**
 * R-WRK-4: ONE non-overlapping, unref'd renewal loop for every lease the worker holds, armed only
 * while it holds one. Each lease is renewed a third into its remaining term; a renewal that got no
 * answer is tried again on the next tick, but only while the term lasts.
 */
export class LeaseRenewer {
  private readonly held = new Map<string, Held>();
  private loop: ScheduledLoop | undefined;

  constructor(
    private readonly channel: LeaseChannel,
    private readonly scheduler: SchedulerRegistry,
    private readonly log: WorkerLog,
    private readonly signal: AbortSignal,
    private readonly tickMs: number = RENEW_TICK_MS,
    private readonly now: () => number = Date.now,
  ) {}

  get size(): number {
    return this.held.size;
  }

  hold(lease: HeldLease, handlers: LeaseHandlers): void {
    this.held.set(lease.offerId, { lease, handlers, renewAtMs: renewalDue(this.now(), lease.expiresAtMs) });
    this.loop ??= new ScheduledLoop(this.scheduler, 'worker-lease-renewal', this.tickMs, () => this.cycle(), {
      warn: (m) => this.log.warn('lease renewal loop', { detail: String(m) }),
    });
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

  private async cycle(): Promise<void> {
    for (const held of [...this.held.values()]) {
      if (this.signal.aborted) return;
      if (this.held.get(held.lease.offerId) === held && this.now() >= held.renewAtMs) await this.renew(held);
    }
  }

  private async renew(held: Held): Promise<void> {
    const { lease, handlers } = held;
    if (this.now() >= lease.expiresAtMs) return this.lose(held, 'lease_term_ended');
    let cancelRequested = false;
    try {
      const body = () => {
        // Checked again when the call's turn in the chain comes: never sent past the term.
        if (this.now() >= lease.expiresAtMs) throw new Error('lease term ended');
        return leaseFence(lease);
      };
      await this.channel.leaseCall('renew', body, {
        signal: this.signal,
        onAnswer: (answer) => {
          // Applied in the chain's turn: the next lease call is built with the new version.
          const renewed = parseLeaseAnswer(answer, 'renew');
          lease.leaseVersion = renewed.lease.version;
          lease.expiresAtMs = Date.parse(renewed.lease.expiresAt);
          cancelRequested = renewed.cancelRequested;
        },
      });
      held.renewAtMs = renewalDue(this.now(), lease.expiresAtMs);
      this.log.debug('lease renewed', { offerId: lease.offerId, leaseVersion: lease.leaseVersion });
      if (cancelRequested) handlers.cancelRequested();
    } catch (error) {
      if (this.signal.aborted || isSessionFenced(error)) return; // the lifecycle ends everything
      if (!isLeaseFenced(error) && this.now() < lease.expiresAtMs) {
        this.log.warn('lease renewal failed; trying again inside its term', {
          offerId: lease.offerId,
          ...describeError(error),
        });
        return; // still due: the next tick tries again
      }
      this.lose(held, isLeaseFenced(error) ? (error.reason ?? error.code) : 'lease_term_ended', error);
    }
  }

  private lose(held: Held, reason: string, error?: unknown): void {
    this.release(held.lease.offerId);
    this.log.error('lease lost; its run is killed and not completed', {
      offerId: held.lease.offerId,
      reason,
      ...(error ? describeError(error) : {}),
    });
    held.handlers.lost(reason);
  }
}
