import { FakeControlPlane } from '../../test-support/fake-control-plane';
import { WorkerHarness } from '../../test-support/worker-harness';

/**
 * ADR 0028: the run's kill times (its own timers and the reaper's switch) move with each renewal, and a
 * kill grace too long for the term gives way. Runs longer than their first lease term, on 4 s leases
 * (the shortest run-supervisor.spec holds: renewed 1.3 s in, killed 0.5 s before the end).
 */
const LEASE_MS = 4_000;

let h: WorkerHarness;
let plane: FakeControlPlane;
afterEach(() => h?.dispose());

/** Starts a worker on 4 s leases, runs `sleep 5` (past its first term) and waits for its completion. */
async function runPastFirstTerm(env: Record<string, string> = {}) {
  plane = new FakeControlPlane(LEASE_MS);
  h = new WorkerHarness(plane, env);
  await h.lifecycle.start();
  plane.enqueue({ command: 'sleep 5; echo done' });
  await h.until('the completion', () => plane.leaseList[0]?.completion);
  return plane.leaseList[0]!;
}

it("a run longer than its first term is renewed and not killed: its timers and the reaper's switch moved with the term", async () => {
  const lease = await runPastFirstTerm();
  expect(lease.completion).toMatchObject({ outcome: 'succeeded', exitCode: 0 });
  expect(plane.of('renew').length).toBeGreaterThanOrEqual(2);
  // The switch was armed at each renewal, each time later: the debug line says each hard stop armed.
  const armed = h.lines
    .filter((l) => l.msg === "the attempt's hard stop: the reaper's switch kills it then")
    .map((l) => Date.parse(String(l.hardStopAt)));
  expect(armed.length).toBeGreaterThanOrEqual(3); // at the launch and at two renewals at least
  expect(armed).toEqual([...armed].sort((a, b) => a - b));
});

it('a kill grace too long for the lease term gives way for the run and says so; the run succeeds', async () => {
  const lease = await runPastFirstTerm({ QL_WORKER_KILL_GRACE_MS: '5000' });
  expect(lease.completion).toMatchObject({ outcome: 'succeeded', exitCode: 0 });
  const warning = h.lines.find((l) =>
    l.msg.startsWith('QL_WORKER_KILL_GRACE_MS does not fit this lease term'),
  );
  expect(warning).toMatchObject({ level: 'warn', offerId: lease.offerId, killGraceMs: 5000 });
  // The term left when the run began (at most the 4 s lease) and the grace that fits it: renewed a
  // third into the term, SIGTERM must wait past that renewal — half the term less the 500 ms margin.
  const termMs = Number(warning!.termMs);
  expect(termMs).toBeGreaterThan(0);
  expect(termMs).toBeLessThanOrEqual(LEASE_MS);
  expect(Math.abs(Number(warning!.effectiveGraceMs) - (termMs / 2 - 500))).toBeLessThanOrEqual(1);
});
