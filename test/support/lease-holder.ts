import type { ExecutionOffer } from '@ql/contracts';
import type { readPair } from './test-plane';

/** A registered worker session as the e2e tests drive it over the ingress. */
export interface IngressSession {
  readonly workerId: string;
  readonly sessionId: string;
  readonly creds: ReturnType<typeof readPair>;
  readonly generation: number;
  readonly version: number;
}

/** The holder of a run lease: its offer and the token the worker made. */
export interface LeaseHolder {
  readonly offer: ExecutionOffer;
  readonly token: string;
}

/** The lease fence every activation call carries. */
export const leaseFence = (s: IngressSession, h: LeaseHolder, leaseVersion = 0) => ({
  generation: s.generation,
  expectedVersion: s.version,
  offerId: h.offer.lease.offerId,
  leaseToken: h.token,
  leaseGeneration: h.offer.lease.leaseGeneration,
  leaseVersion,
});
