import { ClaimCommand, leaseTokenDigest } from '@ql/domain';
import { QueueSignals, SqlDatabase, openQueueSignals } from '@ql/persistence';
import { OfferLongPoll } from '../../apps/control-plane/src/leases/offer-long-poll';
import { OfferWaiters } from '../../apps/control-plane/src/leases/offer-waiters';
import { DispatchTarget } from '../support/dispatch-targets';
import { validCapabilities } from '../support/fixtures';
import { DispatchFixture, RUN_LEASE, SESSION_LEASE, expectFence, newToken } from './dispatch.contract';
import { CURRENT_SOFTWARE } from '../support/placement-fixtures';

/** Long enough that a test passing in time proves a signal woke the pull, not the safety net. */
const NO_SAFETY_NET_MS = 60_000;
/** A held pull that was never woken answers after this (and the test then fails on its answer). */
const WAIT_MS = 8_000;

type Worker = Awaited<ReturnType<DispatchFixture['worker']>>;

/**
 * Long-poll offers (ADR 0019) on a real database: a held pull is woken by the database's own queue
 * signal — on PostgreSQL a NOTIFY from a write on another connection, on SQLite the connection's
 * triggers — and by its session changing; it ends on drain, fence, shutdown and the client leaving.
 * `writer` is the connection runs are triggered and sessions changed through.
 */
export function describeOfferWaitContract(dialect: string, makeTarget: () => DispatchTarget): void {
  describe(`long-poll offers (${dialect})`, () => {
    let target: DispatchTarget;
    let f: DispatchFixture;
    let writer: DispatchFixture;
    let signals: QueueSignals;
    let waiters: OfferWaiters;
    let claims: number;
    let n = 0;
    const workerId = () => `lp-${dialect}-${++n}`;

    const longPoll = (recheckMs = NO_SAFETY_NET_MS) =>
      new OfferLongPoll(
        {
          claim: (command: ClaimCommand) => {
            claims++;
            return f.leases.claim(command);
          },
        },
        f.sessions,
        waiters,
        { maxWaitMs: 20_000, recheckMs },
      );
    const command = (w: Worker): ClaimCommand => ({
      workerId: w.workerId,
      sessionId: w.sessionId,
      fence: w.fence,
      offerId: f.ids.uuidV7(),
      tokenDigest: leaseTokenDigest(newToken()),
      software: CURRENT_SOFTWARE,
      leaseMs: RUN_LEASE,
      preferenceHoldMs: 0,
    });
    const never = new AbortController().signal;

    beforeAll(async () => {
      target = makeTarget();
      f = new DispatchFixture(await target.open());
      // PostgreSQL: another pool (another replica); SQLite: the process's one connection.
      writer = dialect === 'postgres' ? new DispatchFixture(await target.openSecond(), f.ids) : f;
    });
    afterAll(async () => {
      await target.dispose();
    });
    beforeEach(async () => {
      for (const table of ['run_events', 'run_leases', 'attempts', 'runs'])
        await f.db.run(`DELETE FROM ${table}`);
      await f.db.run('UPDATE workers SET active_leases = 0');
      signals = openQueueSignals(f.db as SqlDatabase);
      await signals.whenListening();
      waiters = new OfferWaiters(signals);
      claims = 0;
    });
    afterEach(async () => {
      waiters.close();
      await signals.close();
      expect({ held: waiters.size, waiting: waiters.waitingCount }).toEqual({ held: 0, waiting: 0 });
    });

    it('a held pull is offered a run triggered meanwhile at once, not at the safety-net re-check', async () => {
      const worker = await f.worker(workerId());
      const task = await writer.task();
      const started = Date.now();
      const pull = longPoll().pull(command(worker), WAIT_MS, never);
      await waiters.whenWaiting(1);
      const [run] = await writer.queue(task.id, 1);
      const result = await pull;
      expect(result).toMatchObject({ kind: 'offered', offer: { run: { id: run!.id } } });
      expect(Date.now() - started).toBeLessThan(WAIT_MS / 2);
    });

    it('one queued run wakes one of many held pulls: one claim, not one per puller', async () => {
      const workers = await Promise.all(Array.from({ length: 6 }, () => f.worker(workerId())));
      const task = await writer.task();
      const pulls = workers.map((w) => longPoll().pull(command(w), WAIT_MS, never));
      await waiters.whenWaiting(workers.length);
      const before = claims;
      await writer.queue(task.id, 1);
      // The first answer is the offer; the others still wait: close ends them idle.
      expect(await Promise.race(pulls)).toMatchObject({ kind: 'offered' });
      waiters.close();
      const results = await Promise.all(pulls);
      expect(results.filter((r) => r.kind === 'offered')).toHaveLength(1);
      // One claim for the run; closing wakes the rest without a claim.
      expect(claims - before).toBe(1);
    });

    it('a held pull that cannot take the run hands the wake-up to the next one', async () => {
      const plain = await f.worker(workerId());
      const able = await f.worker(workerId(), 4, { labels: { ...validCapabilities().labels, gpu: 'yes' } });
      const task = await writer.task({ placement: { required: { labels: { gpu: 'yes' } } } });
      const first = longPoll().pull(command(plain), WAIT_MS, never);
      await waiters.whenWaiting(1);
      const second = longPoll().pull(command(able), WAIT_MS, never);
      await waiters.whenWaiting(2);
      const started = Date.now();
      const [run] = await writer.queue(task.id, 1);
      expect(await second).toMatchObject({ kind: 'offered', offer: { run: { id: run!.id } } });
      // Handed on, not found by the second pull's own last claim at the end of its wait.
      expect(Date.now() - started).toBeLessThan(WAIT_MS / 2);
      waiters.close();
      expect(await first).toMatchObject({ kind: 'idle', reason: 'no_matching_run' });
    });

    it("the worker's own heartbeats during the wait do not fence the held pull", async () => {
      const worker = await f.worker(workerId());
      const task = await writer.task();
      const pull = longPoll().pull(command(worker), WAIT_MS, never);
      await waiters.whenWaiting(1);
      const beat = await writer.sessions.heartbeat({
        workerId: worker.workerId,
        sessionId: worker.sessionId,
        fence: worker.fence,
        leaseMs: SESSION_LEASE,
        availableSlots: 4,
      });
      expect(beat.version).toBeGreaterThan(worker.fence.expectedVersion);
      await writer.queue(task.id, 1);
      expect(await pull).toMatchObject({ kind: 'offered' });
    });

    it('a pull sent with a version older than a heartbeat that overtook it is still served', async () => {
      const worker = await f.worker(workerId());
      await writer.sessions.heartbeat({
        workerId: worker.workerId,
        sessionId: worker.sessionId,
        fence: worker.fence,
        leaseMs: SESSION_LEASE,
        availableSlots: 4,
      });
      const task = await writer.task();
      await writer.queue(task.id, 1);
      expect(await longPoll().pull(command(worker), WAIT_MS, never)).toMatchObject({ kind: 'offered' });
      // Without a wait the pull is judged as before: its version is stale.
      await expectFence(f.leases.claim(command(worker)), 'session', 'version_mismatch');
    });

    it('draining the session ends its held pull at once: idle, draining', async () => {
      const worker = await f.worker(workerId());
      const pull = longPoll().pull(command(worker), WAIT_MS, never);
      await waiters.whenWaiting(1);
      const started = Date.now();
      await writer.sessions.drainWorker(worker.workerId, { actor: 'test', action: 'test', target: 'test' });
      expect(await pull).toMatchObject({ kind: 'idle', reason: 'draining' });
      expect(Date.now() - started).toBeLessThan(WAIT_MS / 2);
    });

    it("a replaced session's held pull ends fenced", async () => {
      const worker = await f.worker(workerId());
      const pull = longPoll().pull(command(worker), WAIT_MS, never);
      await waiters.whenWaiting(1);
      const started = Date.now();
      await writer.worker(worker.workerId); // the same worker registers a new session
      await expectFence(pull, 'session', 'session_replaced');
      expect(Date.now() - started).toBeLessThan(WAIT_MS / 2);
    });

    it('shutdown and a client that left end a held pull at once, idle; nothing is left waiting', async () => {
      const worker = await f.worker(workerId());
      const gone = new AbortController();
      const left = longPoll().pull(command(worker), WAIT_MS, gone.signal);
      await waiters.whenWaiting(1);
      gone.abort();
      expect(await left).toMatchObject({ kind: 'idle', reason: 'no_queued_runs' });
      expect(waiters.waitingCount).toBe(0);
      const shut = longPoll().pull(command(worker), WAIT_MS, never);
      await waiters.whenWaiting(1);
      const started = Date.now();
      waiters.close();
      expect(await shut).toMatchObject({ kind: 'idle', reason: 'no_queued_runs' });
      expect(Date.now() - started).toBeLessThan(1_000);
      // After close a pull answers at once, held or not.
      expect(await longPoll().pull(command(worker), WAIT_MS, never)).toMatchObject({ kind: 'idle' });
    });

    it('without a signal the safety net re-checks; waitMs 0 answers at once as before', async () => {
      const worker = await f.worker(workerId());
      const task = await writer.task();
      // Queued behind the signal's back: a write the triggers do not see (as a lost NOTIFY).
      const [run] = await writer.queue(task.id, 1);
      await f.db.run(`UPDATE runs SET status = 'retry_wait' WHERE id = :id`, { id: run!.id });
      const pull = longPoll(50).pull(command(worker), WAIT_MS, never);
      await waiters.whenWaiting(1);
      await signals.close(); // no more signals at all
      await f.db.run(`UPDATE runs SET status = 'queued' WHERE id = :id`, { id: run!.id });
      expect(await pull).toMatchObject({ kind: 'offered' });
      const idleAtOnce = longPoll().pull(command(worker), 0, never);
      expect(await idleAtOnce).toMatchObject({ kind: 'idle', reason: 'no_queued_runs' });
      expect(waiters.waitingCount).toBe(0);
    });
  });
}
