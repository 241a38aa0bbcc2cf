import { createIdGenerator } from '@ql/contracts';
import { FakeControlPlane, lostAnswer } from '../../test-support/fake-control-plane';
import { LeaseChannel } from './lease-channel';
import { OfferPuller, newLeaseToken } from './offer-puller';

/** The fake control plane as a lease channel, always with the session's current version. */
const channelOf = (plane: FakeControlPlane): LeaseChannel => ({
  leaseCall: (action, body) =>
    plane.call(action, '01900000-0000-7000-8000-000000000000', {
      generation: 1,
      expectedVersion: plane.version,
      ...body(),
    }),
});
const signal = new AbortController().signal;

describe('OfferPuller (R-LSE-2, R-WRK-2)', () => {
  it('makes a fresh offer id and a 256-bit base64url token per pull; idle is null', async () => {
    const plane = new FakeControlPlane();
    const puller = new OfferPuller(channelOf(plane), createIdGenerator());
    expect(await puller.pull(signal)).toBeNull();
    plane.enqueue({ command: 'echo hi' });
    const pulled = await puller.pull(signal);
    expect(pulled?.offer.lease.offerId).toBe(plane.of('offers')[1]!.body.offerId);
    const [a, b] = plane.of('offers').map((c) => c.body);
    expect(a!.offerId).not.toBe(b!.offerId);
    expect(a!.leaseToken).not.toBe(b!.leaseToken);
    expect(Buffer.from(newLeaseToken(), 'base64url')).toHaveLength(32);
  });

  it('refuses an offer for another offer id (not its claim), and the next pull starts afresh', async () => {
    const plane = new FakeControlPlane();
    plane.enqueue({ command: 'echo hi' });
    plane.reply.offers = (c, p) => {
      const answer = p.accept(c) as { lease: { offerId: string } };
      return { ...answer, lease: { ...answer.lease, offerId: createIdGenerator().uuidV7() } };
    };
    const puller = new OfferPuller(channelOf(plane), createIdGenerator());
    await expect(puller.pull(signal)).rejects.toThrow('lease.offerId:other_offer');
    expect(puller.replaying).toBeNull();
  });

  it('keeps the offer id and token only after a call that got no answer', async () => {
    const plane = new FakeControlPlane();
    plane.reply.offers = () => {
      throw lostAnswer();
    };
    const puller = new OfferPuller(channelOf(plane), createIdGenerator());
    await expect(puller.pull(signal)).rejects.toThrow(/transport failed/);
    expect(puller.replaying).toBe(plane.of('offers')[0]!.body.offerId);
  });
});
