import { FakeControlPlane, rateLimited } from '../../test-support/fake-control-plane';
import { WorkerHarness } from '../../test-support/worker-harness';
import { IngressCallError } from '../ingress-client/worker-ingress-https.client';
import { RETRY_AFTER_CAP_MS, retryAfterOf } from './lease-channel';

/**
 * ADR 0042 in the worker: a 429 (or a 503) says when to call again, and every loop that got one waits
 * that long — not its own fixed delay (20 ms between lease-call retries here, 50 ms between pulls,
 * a 250 ms renewal tick) — and the burst is one warning in the log, not a line per call per loop.
 */
let h: WorkerHarness;
let plane: FakeControlPlane;
const start = async (leaseMs?: number) => {
  plane = new FakeControlPlane(leaseMs);
  h = new WorkerHarness(plane);
  await h.lifecycle.start();
};
afterEach(() => h?.dispose());

const RETRY_AFTER_MS = 600;
/** The first `n` calls of a route are refused 429 with `Retry-After`, the rest answered as usual. */
const refuseFirst = (n: number) => {
  let refused = 0;
  return (call: Parameters<NonNullable<FakeControlPlane['reply']['offers']>>[0], p: FakeControlPlane) => {
    if (refused++ < n) throw rateLimited(RETRY_AFTER_MS);
    return p.accept(call);
  };
};
const gaps = (calls: { at: number }[]) => calls.slice(1).map((c, i) => c.at - calls[i]!.at);
const warnings = () => h.lines.filter((l) => l.level === 'warn').map((l) => l.msg);
const BURST_WARNING = 'control plane rate-limits this worker; its calls wait as Retry-After says';

describe('a rate-limited worker waits as Retry-After says and logs the burst once (ADR 0042)', () => {
  it('a lease call (starting) is sent again after Retry-After, not after the fixed retry delay; the run succeeds', async () => {
    await start();
    plane.reply.starting = refuseFirst(2);
    plane.enqueue({ command: 'echo ok' });
    await h.until('completion', () => plane.leaseList[0]?.completion);
    expect(plane.leaseList[0]!.completion).toMatchObject({ outcome: 'succeeded' });
    const starts = plane.of('starting');
    expect(starts).toHaveLength(3);
    for (const gap of gaps(starts)) expect(gap).toBeGreaterThanOrEqual(RETRY_AFTER_MS - 5);
    expect(warnings()).toEqual([BURST_WARNING]);
    expect(h.lines.find((l) => l.msg === BURST_WARNING)).toMatchObject({
      action: 'starting',
      retryAfterMs: RETRY_AFTER_MS,
    });
  });

  it('the pull loop pulls again after Retry-After, not at its next tick, and logs no pull failure', async () => {
    await start();
    plane.reply.offers = refuseFirst(2);
    await h.until('a pull answered', () => plane.of('offers').length >= 3);
    for (const gap of gaps(plane.of('offers').slice(0, 3)))
      expect(gap).toBeGreaterThanOrEqual(RETRY_AFTER_MS - 5);
    expect(warnings()).toEqual([BURST_WARNING]);
  });

  it('a refused renewal is tried again after Retry-After, not at the next tick, without a renewal warning; the run succeeds', async () => {
    // A 9 s term: the renewal is due 3 s into it and sent again 0.6 s later, far from the hard stop
    // (8.5 s) even when a loaded machine starts the run late; the run outlasts both (4.5 s).
    await start(9_000);
    plane.reply.renew = refuseFirst(1);
    plane.enqueue({ command: 'sleep 4.5; echo done' });
    await h.until('completion', () => plane.leaseList[0]?.completion, 30_000);
    expect(plane.leaseList[0]!.completion).toMatchObject({ outcome: 'succeeded' });
    const [refused, renewed] = plane.of('renew');
    expect(renewed!.at - refused!.at).toBeGreaterThanOrEqual(RETRY_AFTER_MS - 5);
    expect(warnings()).toEqual([BURST_WARNING]);
  });

  it('a refused heartbeat is the burst warning only, not a heartbeat failure as well', async () => {
    await start();
    // Counted from here: on a loaded machine heartbeats may have gone before the refusals begin.
    const before = plane.of('heartbeat').length;
    plane.reply.heartbeat = refuseFirst(3);
    await h.until(
      'a heartbeat answered after three refused',
      () => plane.of('heartbeat').length >= before + 4,
    );
    expect(warnings()).toEqual([BURST_WARNING]);
  });

  it('Retry-After is honoured up to a cap; an error without one leaves the caller its own delay', () => {
    expect(retryAfterOf(rateLimited(1_000))).toBe(1_000);
    expect(retryAfterOf(rateLimited(86_400_000))).toBe(RETRY_AFTER_CAP_MS);
    expect(retryAfterOf(new IngressCallError('x', 0, 'transport_error', 'reset'))).toBeUndefined();
    expect(retryAfterOf(new Error('x'))).toBeUndefined();
  });
});
