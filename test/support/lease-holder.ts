import { randomBytes } from 'node:crypto';
import { ExecutionOffer, ingressPath, parseOfferResponse } from '@ql/contracts';
import { newSessionId } from './fixtures';
import type { TestPlane, readPair } from './test-plane';

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

/** One pull by `s` under a new offer id and token: the offer it got and that token (an idle answer throws). */
export async function pullOffer(t: TestPlane, s: IngressSession): Promise<LeaseHolder> {
  const token = randomBytes(32).toString('base64url');
  const res = await t.ingress(s.creds, ingressPath(s.workerId, s.sessionId, 'offers'), {
    generation: s.generation,
    expectedVersion: s.version,
    offerId: newSessionId(),
    leaseToken: token,
  });
  const offer = parseOfferResponse(res.raw);
  if (offer.status !== 'offered') throw new Error(`expected an offer, got ${res.status} ${res.raw}`);
  return { offer, token };
}
