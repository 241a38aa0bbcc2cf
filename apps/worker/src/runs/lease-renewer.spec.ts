import { SchedulerRegistry } from '@nestjs/schedule';
import type { WorkerLog } from '../logging/worker-log';
import type { HeldLease, LeaseAction, LeaseCallOptions, LeaseChannel } from './lease-channel';
import { LeaseRenewer } from './lease-renewer';

const OFFER = '01a24296-434d-7227-a4ec-443ce21cc446';
const HUNG_OFFER = '01a24296-434d-7227-a4ec-443ce21cc447';
const quiet: WorkerLog = {
  debug: () => undefined,
  info: () => undefined,
  warn: () => undefined,
  error: () => undefined,
};

/**
 * A channel that records when (on the renewer's clock) each renewal was SENT and answers it with a
 * term `termMs` past that moment, in the control plane's time, which `toLocalTime` maps 1:1.
 */
class RecordingChannel implements LeaseChannel {
  readonly sentAt: number[] = [];
  /** Renewals of the offer `hangs` names: sent, never answered (until the worker gives up, its signal). */
  readonly hung: number[] = [];
  constructor(
    private readonly clock: { now: number },
    private readonly termMs: number,
    private readonly hangs?: string,
  ) {}
  async leaseCall<A extends LeaseAction>(
    _action: A,
    body: () => Record<string, unknown>,
    options: LeaseCallOptions<A> = {},
  ): Promise<never> {
    if (body().offerId === this.hangs) {
      this.hung.push(this.clock.now);
      return new Promise<never>((_, reject) =>
        options.signal?.addEventListener('abort', () => reject(new Error('aborted'))),
      );
    }
    this.sentAt.push(this.clock.now);
    const answer = {
      lease: { version: this.sentAt.length, expiresAt: new Date(this.clock.now + this.termMs).toISOString() },
      cancelRequested: false,
    };
    options.onAnswer?.(answer as never);
    return answer as never;
  }
  toLocalTime(serverMs: number): number {
    return serverMs;
  }
}

/** Resolves once `condition` holds, checking after each turn of the timers; fails after 5 s. */
async function until(condition: () => boolean): Promise<void> {
  const deadline = Date.now() + 5_000;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('the renewal was not sent');
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
}

const leaseOf = (offerId: string, termEndMs: number): HeldLease => ({
  offerId,
  leaseToken: 't',
  leaseGeneration: 1,
  leaseVersion: 0,
  termEndMs,
});

/** A negative check needs time to pass: ~15 ticks of the 1 ms loop with the clock held still. */
const someTicks = () => new Promise((resolve) => setTimeout(resolve, 30));

describe('LeaseRenewer: when it renews (R-WRK-4)', () => {
  it('renews a third into the remaining term — not earlier, not later — and again a third into each new term', async () => {
    const clock = { now: 1_000_000 };
    const channel = new RecordingChannel(clock, 9_000);
    const abort = new AbortController();
    const renewed: number[] = [];
    const renewer = new LeaseRenewer(
      channel,
      new SchedulerRegistry(),
      quiet,
      abort.signal,
      1,
      () => clock.now,
    );
    const lease: HeldLease = {
      offerId: OFFER,
      leaseToken: 't',
      leaseGeneration: 1,
      leaseVersion: 0,
      termEndMs: clock.now + 9_000,
    };
    try {
      renewer.hold(lease, {
        cancelRequested: () => undefined,
        lost: (reason) => {
          throw new Error(`lost: ${reason}`);
        },
        renewed: () => renewed.push(lease.termEndMs),
      });
      // 9 s left: due 3 s in. Just before, many ticks pass and nothing is sent.
      clock.now += 2_999;
      await someTicks();
      expect(channel.sentAt).toEqual([]);
      clock.now += 1; // 3 000 ms: a third of 9 000
      await until(() => channel.sentAt.length === 1);
      expect(channel.sentAt).toEqual([1_003_000]);
      expect(lease.termEndMs).toBe(1_012_000);
      expect(renewed).toEqual([1_012_000]);
      // The new term ends 9 s after the renewal: the next one is due a third into it, at 1 006 000.
      clock.now = 1_005_999;
      await someTicks();
      expect(channel.sentAt).toHaveLength(1);
      clock.now = 1_006_000;
      await until(() => channel.sentAt.length === 2);
      expect(channel.sentAt).toEqual([1_003_000, 1_006_000]);
    } finally {
      abort.abort();
      await renewer.stop();
    }
  });

  it("one lease whose renewal never answers does not hold back another's (ADR 0028): the other is renewed on time, again", async () => {
    const clock = { now: 1_000_000 };
    const channel = new RecordingChannel(clock, 9_000, HUNG_OFFER);
    const abort = new AbortController();
    const renewer = new LeaseRenewer(
      channel,
      new SchedulerRegistry(),
      quiet,
      abort.signal,
      1,
      () => clock.now,
    );
    const handlers = {
      cancelRequested: () => undefined,
      lost: (reason: string) => {
        throw new Error(`lost: ${reason}`);
      },
      renewed: () => undefined,
    };
    const hung = leaseOf(HUNG_OFFER, clock.now + 9_000);
    const healthy = leaseOf(OFFER, clock.now + 9_000);
    try {
      // The hung lease first: a loop that awaited each renewal in turn would never reach the other.
      renewer.hold(hung, handlers);
      renewer.hold(healthy, handlers);
      clock.now += 3_000; // both due
      await until(() => channel.sentAt.length === 1);
      expect({ hung: channel.hung, renewed: channel.sentAt }).toEqual({
        hung: [1_003_000],
        renewed: [1_003_000],
      });
      expect(healthy.termEndMs).toBe(1_012_000);
      // Its next renewal is due at 1 006 000 and goes then, the other's call still unanswered.
      clock.now = 1_006_000;
      await until(() => channel.sentAt.length === 2);
      expect({ hung: channel.hung, renewed: channel.sentAt }).toEqual({
        hung: [1_003_000],
        renewed: [1_003_000, 1_006_000],
      });
    } finally {
      abort.abort();
      await renewer.stop();
    }
  });
});
