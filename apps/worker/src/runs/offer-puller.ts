import { randomBytes } from 'node:crypto';
import { ExecutionOffer, OfferContractError, OfferResponse, parseOfferResponse } from '@ql/contracts';
import type { IdGenerator } from '@ql/domain';
import { LeaseChannel, isRetryable } from './lease-channel';

/** 256 random bits, base64url without padding (43 characters): the worker's capability for one lease. */
export function newLeaseToken(): string {
  return randomBytes(32).toString('base64url');
}

export interface PulledOffer {
  readonly offer: ExecutionOffer;
  readonly leaseToken: string;
}

/**
 * One `offers` call per pull (R-LSE-2, R-WRK-2): a fresh UUIDv7 offer id and lease token each time,
 * except after a call that got no answer — then the same id and token go again, and the control
 * plane replays the offer it may have committed instead of leaving a lease nobody knows.
 */
export class OfferPuller {
  private pending: { readonly offerId: string; readonly leaseToken: string } | null = null;

  constructor(
    private readonly channel: LeaseChannel,
    private readonly ids: IdGenerator,
  ) {}

  /** The offer id a lost answer will be replayed with, if any (for logs and tests). */
  get replaying(): string | null {
    return this.pending?.offerId ?? null;
  }

  /**
   * The offer this pull got, or null for `idle`; an answer breaking the contract throws. With
   * `waitMs` > 0 it is a long poll (ADR 0019): the control plane may hold it that long, so it goes
   * outside the call chain on its own socket, with `timeoutMs` on top of the wait for the answer.
   */
  async pull(signal: AbortSignal, waitMs = 0, timeoutMs = 0): Promise<PulledOffer | null> {
    const p = (this.pending ??= { offerId: this.ids.uuidV7(), leaseToken: newLeaseToken() });
    let offer: OfferResponse;
    try {
      // Read from the answer's bytes by the contract's one strict parser (R-LSE-2).
      offer = (await this.channel.leaseCall('offers', () => (waitMs > 0 ? { ...p, waitMs } : { ...p }), {
        signal,
        parse: parseOfferResponse,
        ...(waitMs > 0 ? { detached: { timeoutMs: waitMs + timeoutMs } } : {}),
      })) as OfferResponse;
    } catch (error) {
      if (!isRetryable(error)) this.pending = null; // a lost answer keeps the id and token for the replay
      throw error;
    }
    this.pending = null;
    if (offer.status === 'idle') return null;
    if (offer.lease.offerId !== p.offerId) throw new OfferContractError('lease.offerId:other_offer');
    return { offer, leaseToken: p.leaseToken };
  }
}
