import { Inject, Injectable } from '@nestjs/common';
import { CONFIG } from '../core/core';
import { ControlPlaneConfig } from '../config/config';
import { Allowance, RateLimiter } from './rate-limiter';

type RateSettings = Pick<
  ControlPlaneConfig,
  'ingressRatePerSecond' | 'ingressRateBurst' | 'ingressRatePerSlot'
>;

/** The slots of a worker this process has not seen register or heartbeat (a replica that restarted). */
export const UNKNOWN_WORKER_SLOTS = 1;

/**
 * ADR 0042: a worker's allowance grows with its slots — `QL_INGRESS_RATE_PER_SLOT` requests per second
 * per slot and a burst of two seconds of that — and never falls below `QL_INGRESS_RATE_PER_SECOND` /
 * `QL_INGRESS_RATE_BURST`, which stay the floor (and, set high, lift the limit for everyone).
 */
export function ingressAllowance(settings: RateSettings, slots: number): Allowance {
  const bySlots = settings.ingressRatePerSlot * slots;
  return {
    perSecond: Math.max(settings.ingressRatePerSecond, bySlots),
    burst: Math.max(settings.ingressRateBurst, 2 * bySlots),
  };
}

/** RFC 9110 `Retry-After`: whole seconds, at least 1, never sooner than the bucket allows. */
export function retryAfterSeconds(waitMs: number): number {
  return Math.max(1, Math.ceil(waitMs / 1000));
}

/**
 * The one ingress rate limit of this control-plane process: one token bucket per worker id across all
 * its routes (the guard asks before any repository call). Sized from the worker's slots, which this
 * process learns from the register and heartbeat answers it serves — no database read on the way in.
 */
@Injectable()
export class IngressRateLimit {
  private readonly buckets: RateLimiter;

  constructor(@Inject(CONFIG) private readonly settings: RateSettings) {
    this.buckets = new RateLimiter(ingressAllowance(settings, UNKNOWN_WORKER_SLOTS));
  }

  /** One request of `workerId`: 0 when it may pass, else the milliseconds until one may. */
  take(workerId: string): number {
    return this.buckets.take(workerId);
  }

  /** The worker's session says it runs `slots` at most (register, heartbeat answers). */
  learnSlots(workerId: string, slots: number): void {
    this.buckets.resize(workerId, ingressAllowance(this.settings, slots));
  }
}
