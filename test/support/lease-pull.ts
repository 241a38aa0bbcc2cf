import { randomBytes } from 'node:crypto';
import { ingressPath, parseOfferResponse } from '@ql/contracts';
import { newSessionId } from './fixtures';
import type { IngressSession, LeaseHolder } from './lease-holder';
import type { TestPlane } from './test-plane';

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
