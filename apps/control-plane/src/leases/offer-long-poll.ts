import {
  ClaimCommand,
  ClaimResult,
  FencedError,
  IdleReason,
  LeaseRepository,
  WorkerSessionRepository,
} from '@ql/domain';
import { OfferWaiters } from './offer-waiters';

/** Idle answers a wait can change: a run may still be queued. Draining, capacity and fences cannot. */
const WAITABLE: ReadonlySet<IdleReason> = new Set([
  'no_queued_runs',
  'no_matching_run',
  'preferred_elsewhere',
]);

/** How many times a held pull re-reads its session's version after its own calls moved it. */
const VERSION_CATCH_UP_TRIES = 3;

export interface LongPollSettings {
  /** The control plane's cap on a pull's `waitMs`. */
  readonly maxWaitMs: number;
  /** A held pull claims again at least this often, signal or not (the safety net). */
  readonly recheckMs: number;
}

/**
 * One pull, held while it finds nothing claimable (ADR 0019): the claim as today; while its answer is
 * `idle` for a reason a new run could change, it waits for a wake-up of `OfferWaiters` (a queued run,
 * its session changing), at most `recheckMs` at a time, and claims again, until it is offered a run,
 * the wait is over, the client goes away or the plane shuts down; then it answers what the last claim
 * said. `waitMs` 0 or absent is the pull of before, exactly.
 *
 * A held pull is sent outside the worker's serialized call chain, so the worker's own heartbeats may
 * move its session version while it waits; a claim refused with `version_mismatch` is tried again
 * with the current version **only** when the session id and generation are still the pull's and the
 * version grew — a replaced, disabled, offline or expired session is refused as before.
 */
export class OfferLongPoll {
  constructor(
    private readonly leases: Pick<LeaseRepository, 'claim'>,
    private readonly sessions: Pick<WorkerSessionRepository, 'findWorker'>,
    private readonly waiters: OfferWaiters,
    private readonly settings: LongPollSettings,
  ) {}

  /**
   * `admit` runs before every claim the pull makes while held (not the first: the request's guard just
   * ran) and throws when the caller may no longer claim — its certificate expired or was revoked while
   * it waited (ADR 0033). The run it was woken for is passed on to the next waiter first.
   */
  async pull(
    command: ClaimCommand,
    waitMs: number,
    signal: AbortSignal,
    admit: () => Promise<void> = async () => undefined,
  ): Promise<ClaimResult> {
    const wait = Math.min(waitMs, this.settings.maxWaitMs);
    if (!(wait > 0)) return this.leases.claim(command);
    const until = Date.now() + wait;
    let current = command;
    const claim = async () => {
      const { result, command: used } = await this.claimCatchingUp(current);
      current = used;
      return result;
    };
    let epoch = this.waiters.epoch;
    const first = await claim();
    if (!isWaitable(first)) return first;
    return this.waiters.hold(async () => {
      let result: ClaimResult = first;
      while (isWaitable(result)) {
        const left = until - Date.now();
        if (left <= 0) break;
        const wake = await this.waiters.wait(
          command.workerId,
          Math.min(left, this.settings.recheckMs),
          signal,
          epoch,
        );
        if (wake.reason === 'closed' || wake.reason === 'aborted') break;
        epoch = this.waiters.epoch;
        try {
          await admit();
        } catch (refusal) {
          if (wake.run) this.waiters.passOn(wake.run);
          throw refusal;
        }
        result = await claim();
        // Woken for a run it cannot take: the next waiter tries (a run nobody wants ends the chain).
        if (wake.run && isWaitable(result) && result.reason !== 'no_queued_runs')
          this.waiters.passOn(wake.run);
      }
      return result;
    });
  }

  private async claimCatchingUp(
    command: ClaimCommand,
  ): Promise<{ result: ClaimResult; command: ClaimCommand }> {
    for (let tries = 0; ; tries++) {
      try {
        return { result: await this.leases.claim(command), command };
      } catch (error) {
        if (tries >= VERSION_CATCH_UP_TRIES || !isVersionMismatch(error)) throw error;
        const session = (await this.sessions.findWorker(command.workerId))?.session;
        const sameSession =
          session?.sessionId === command.sessionId && session.generation === command.fence.generation;
        if (!sameSession || session.version <= command.fence.expectedVersion) throw error;
        command = { ...command, fence: { ...command.fence, expectedVersion: session.version } };
      }
    }
  }
}

function isWaitable(result: ClaimResult): result is Extract<ClaimResult, { kind: 'idle' }> {
  return result.kind === 'idle' && WAITABLE.has(result.reason);
}

function isVersionMismatch(error: unknown): boolean {
  return error instanceof FencedError && error.area === 'session' && error.reason === 'version_mismatch';
}
