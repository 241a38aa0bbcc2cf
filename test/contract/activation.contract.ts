// Size: the one activation/completion/logs/deadline contract both dialects run; its cases share the
// fixture (a claimed, fenced lease) and the after-each slot-counter check.
import { LeaseFenceCommand, RUN_LOG_LIMITS, leaseTokenDigest } from '@ql/domain';
import { SqlActivationRepository } from '@ql/persistence';
import { snapshotDatabase } from '../support/db-snapshot';
import { SUCCEEDED_RUN_EVENTS, newSessionId, snapshot } from '../support/fixtures';
import {
  DispatchFixture,
  DispatchTarget,
  RUN_LEASE,
  SESSION_LEASE,
  expectFence,
  newToken,
  offered,
} from './dispatch.contract';

const TIMEOUT = 60_000;
const GRACE = 5_000;
const LOG_CAP = 100;

type Worker = Awaited<ReturnType<DispatchFixture['worker']>>;

/** R-ACT-1..2, R-CMP-1..2, R-RUN-5..7: one contract, run on SQLite and on PostgreSQL. */
export function describeActivationContract(dialect: string, makeTarget: () => DispatchTarget): void {
  describe(`activation, completion, logs and deadlines contract (${dialect})`, () => {
    let target: DispatchTarget;
    let f: DispatchFixture;
    let acts: SqlActivationRepository;
    let n = 0;
    const workerId = (name = 'w') => `${name}-${dialect}-${++n}`;

    beforeAll(async () => {
      target = makeTarget();
      f = new DispatchFixture(await target.open());
      acts = new SqlActivationRepository(f.db, { logCapBytes: LOG_CAP });
    });
    afterAll(async () => {
      await target.dispose();
    });
    beforeEach(async () => {
      for (const table of ['run_logs', 'run_events', 'run_leases', 'attempts', 'runs'])
        await f.db.run(`DELETE FROM ${table}`);
      await f.db.run('UPDATE workers SET active_leases = 0');
    });
    afterEach(async () => {
      await f.expectSlotCountersMatch();
    });

    /** One queued run of a fresh task, claimed by a fresh worker: what every step carries. */
    async function claimed(task: Record<string, unknown> = {}, worker?: Worker) {
      const t = await f.task({ timeoutMs: TIMEOUT, ...task });
      const [run] = await f.queue(t.id, 1);
      const w = worker ?? (await f.worker(workerId()));
      const token = newToken();
      const offer = offered(await f.pull(w, f.ids.uuidV7(), token));
      const fence: LeaseFenceCommand = (({ leaseMs: _leaseMs, ...rest }) => rest)(
        f.leaseCommand(w, offer, token),
      );
      return { run: run!, worker: w, token, offer, fence };
    }

    async function started(task: Record<string, unknown> = {}) {
      const c = await claimed(task);
      await acts.starting(c.fence);
      await acts.running({ ...c.fence, executorHandle: 'pid:4242' });
      return c;
    }

    const activeLeases = async (w: Worker) =>
      Number(
        (await f.db.one<{ n: number | string }>(
          'SELECT active_leases AS n FROM workers WHERE worker_id = :w',
          {
            w: w.workerId,
          },
        ))!.n,
      );
    const eventTypes = async (runId: string) =>
      (await f.runs.events(runId, { afterSeq: 0, limit: 50 })).map((e) => e.type);

    it('starting fixes the deadline from the revision, running pins the handle, completion ends it all', async () => {
      const { run, worker, fence } = await claimed();
      const at = target.clock.now();
      const starting = await acts.starting(fence);
      expect(starting).toMatchObject({
        status: 'applied',
        cancelRequested: false,
        snapshot: {
          runId: run.id,
          runStatus: 'dispatching',
          attemptStatus: 'starting',
          leaseVersion: 0,
          leaseGeneration: 1,
          callbackSequence: 1,
          deadlineAt: at + TIMEOUT,
          startedAt: at,
          finishedAt: null,
          executorHandle: null,
        },
      });
      const running = await acts.running({ ...fence, executorHandle: 'pid:4242' });
      expect(running.snapshot).toMatchObject({
        runStatus: 'running',
        attemptStatus: 'running',
        callbackSequence: 2,
        executorHandle: 'pid:4242',
      });
      expect(await activeLeases(worker)).toBe(1);
      target.clock.advance(1_000);
      const done = await acts.complete({ ...fence, outcome: 'succeeded', exitCode: 0, errorSummary: null });
      expect(done.snapshot).toMatchObject({
        runStatus: 'succeeded',
        attemptStatus: 'succeeded',
        callbackSequence: 3,
        leaseVersion: 1,
        finishedAt: at + 1_000,
      });
      expect(await activeLeases(worker)).toBe(0);
      expect(await f.leases.findLease(fence.offerId)).toMatchObject({ state: 'completed', version: 1 });
      expect(await f.runs.find(run.id)).toMatchObject({ status: 'succeeded', finishedAt: at + 1_000 });
      expect(await eventTypes(run.id)).toEqual(SUCCEEDED_RUN_EVENTS);
    });

    it.each([
      ['running before starting', 'attempt_not_starting'],
      ['start failure before starting', 'attempt_not_starting'],
      ['completion before running', 'attempt_not_running'],
    ])('%s is refused (%s) and changes nothing', async (name, reason) => {
      const { fence } = await claimed();
      if (name.startsWith('completion')) await acts.starting(fence);
      const before = await snapshotDatabase(f.db);
      const call =
        name === 'running before starting'
          ? acts.running({ ...fence, executorHandle: 'pid:1' })
          : name === 'start failure before starting'
            ? acts.startFailure({ ...fence, errorCode: 'spawn_failed' })
            : acts.complete({ ...fence, outcome: 'succeeded', exitCode: 0, errorSummary: null });
      await expectFence(call, 'lease', reason);
      expect(await snapshotDatabase(f.db)).toEqual(before);
    });

    it('an identical acknowledgement replays the recorded result and writes nothing; another payload is 409', async () => {
      const { fence } = await claimed();
      const first = await acts.starting(fence);
      let before = await snapshotDatabase(f.db);
      expect(await acts.starting(fence)).toEqual({ ...first, status: 'already_starting' });
      expect(await snapshotDatabase(f.db)).toEqual(before);
      const running = await acts.running({ ...fence, executorHandle: 'pid:7' });
      before = await snapshotDatabase(f.db);
      expect(await acts.running({ ...fence, executorHandle: 'pid:7' })).toEqual({
        ...running,
        status: 'already_running',
      });
      expect(await acts.starting(fence)).toMatchObject({ status: 'already_running' });
      await expectFence(
        acts.running({ ...fence, executorHandle: 'pid:8' }),
        'lease',
        'acknowledgement_mismatch',
      );
      expect(await snapshotDatabase(f.db)).toEqual(before);
      const done = await acts.complete({ ...fence, outcome: 'failed', exitCode: 3, errorSummary: 'boom' });
      before = await snapshotDatabase(f.db);
      expect(await acts.complete({ ...fence, outcome: 'failed', exitCode: 3, errorSummary: 'boom' })).toEqual(
        {
          ...done,
          status: 'already_terminal',
        },
      );
      await expectFence(
        acts.complete({ ...fence, outcome: 'succeeded', exitCode: 0, errorSummary: null }),
        'lease',
        'acknowledgement_mismatch',
      );
      await expectFence(
        acts.startFailure({ ...fence, errorCode: 'spawn_failed' }),
        'lease',
        'acknowledgement_mismatch',
      );
      expect(await snapshotDatabase(f.db)).toEqual(before);
    });

    it('a completion from a replaced session or under an earlier lease generation is refused and changes nothing', async () => {
      const { worker, fence } = await started();
      await f.sessions.register({
        workerId: worker.workerId,
        sessionId: newSessionId(),
        snapshot: snapshot(),
        leaseMs: SESSION_LEASE,
      });
      const before = await snapshotDatabase(f.db);
      const complete = { outcome: 'succeeded', exitCode: 0, errorSummary: null } as const;
      await expectFence(acts.complete({ ...fence, ...complete }), 'session', 'session_replaced');
      expect(await snapshotDatabase(f.db)).toEqual(before);
      // An unstarted attempt claimed again: the first lease's token is fenced for every step.
      const a = await claimed();
      target.clock.advance(RUN_LEASE + 1);
      await f.leases.sweep(64);
      const token = newToken();
      const again = offered(await f.pull(a.worker, f.ids.uuidV7(), token));
      expect(again.lease.leaseGeneration).toBe(2);
      let state = await snapshotDatabase(f.db);
      await expectFence(acts.starting(a.fence), 'lease', 'lease_not_active');
      await expectFence(acts.complete({ ...a.fence, ...complete }), 'lease', 'lease_not_active');
      await expectFence(
        acts.starting({ ...a.fence, offerId: again.lease.offerId }),
        'lease',
        'lease_token_mismatch',
      );
      expect(await snapshotDatabase(f.db)).toEqual(state);
      // Once the second lease finished the attempt, the first token is still refused (not a late callback).
      const second = {
        ...a.fence,
        offerId: again.lease.offerId,
        tokenDigest: leaseTokenDigest(token),
        leaseGeneration: 2,
      };
      await acts.starting(second);
      await acts.running({ ...second, executorHandle: 'pid:2' });
      await acts.complete({ ...second, ...complete });
      state = await snapshotDatabase(f.db);
      await expectFence(acts.complete({ ...a.fence, ...complete }), 'lease', 'lease_not_active');
      expect(await snapshotDatabase(f.db)).toEqual(state);
    });

    it("a worker's active runs are its unexpired leases; its delete waits until the sweeper ended an expired one", async () => {
      const { worker, offer } = await claimed();
      const id = worker.workerId;
      expect((await f.sessions.activeRuns(id, 1024)).map((r) => [r.offerId, r.attemptStatus])).toEqual([
        [offer.lease.offerId, 'claimed'],
      ]);
      target.clock.advance(RUN_LEASE + 1);
      expect(await f.sessions.activeRuns(id, 1024)).toEqual([]);
      await f.sessions.setDisabled(id, true, { actor: 'test', action: 'worker.disable', target: id });
      const audit = { actor: 'test', action: 'worker.delete', target: `worker:${id}` };
      const before = await snapshotDatabase(f.db);
      await expect(f.sessions.deleteWorker(id, audit)).rejects.toMatchObject({
        reason: 'worker_holds_leases',
      });
      expect(await snapshotDatabase(f.db)).toEqual(before);
      await f.leases.sweep(64); // the unstarted attempt's expired lease ends; its run is queued again
      expect(await f.sessions.deleteWorker(id, audit)).toMatchObject({ workerId: id });
      expect(await f.sessions.findWorker(id)).toBeNull();
    });

    it('a late callback after the sweeper ended the attempt appends exactly one event and changes nothing else', async () => {
      const { run, fence } = await started();
      target.clock.advance(RUN_LEASE + 1);
      expect(await f.leases.sweep(64)).toMatchObject({ failed: 1 });
      const tables = ['workers', 'worker_sessions', 'attempts', 'run_leases', 'run_logs'];
      const before = await snapshotDatabase(f.db, tables);
      const runBefore = await f.runs.find(run.id);
      const events = await f.count('run_events');
      const late = await acts.complete({ ...fence, outcome: 'succeeded', exitCode: 0, errorSummary: null });
      expect(late).toMatchObject({
        status: 'already_terminal',
        snapshot: { attemptStatus: 'lost', runStatus: 'failed' },
      });
      await acts.complete({ ...fence, outcome: 'succeeded', exitCode: 0, errorSummary: null });
      expect(await f.count('run_events')).toBe(events + 1);
      expect((await eventTypes(run.id)).at(-1)).toBe('attempt.late_callback_ignored');
      expect(await snapshotDatabase(f.db, tables)).toEqual(before);
      expect(await f.runs.find(run.id)).toEqual(runBefore);
    });

    it('a completion or start failure after the lease term, before the sweeper ran, is refused (lease_expired) and writes nothing', async () => {
      // Three leases taken at one instant: their terms end together, RUN_LEASE after it.
      const inTerm = await started();
      const late = await started();
      const spawning = await claimed();
      await acts.starting(spawning.fence);
      const complete = { outcome: 'succeeded', exitCode: 0, errorSummary: null } as const;
      target.clock.advance(RUN_LEASE - 1);
      expect(await acts.complete({ ...inTerm.fence, ...complete })).toMatchObject({
        status: 'applied',
        snapshot: { attemptStatus: 'succeeded' },
      });
      // The term ends at expires_at itself; the sweeper has not run, so both leases are still 'active'.
      target.clock.advance(1);
      expect(await f.leases.findLease(late.fence.offerId)).toMatchObject({ state: 'active' });
      const before = await snapshotDatabase(f.db);
      await expectFence(acts.complete({ ...late.fence, ...complete }), 'lease', 'lease_expired');
      await expectFence(
        acts.startFailure({ ...spawning.fence, errorCode: 'spawn_failed' }),
        'lease',
        'lease_expired',
      );
      expect(await snapshotDatabase(f.db)).toEqual(before);
      // The sweeper then ends both (lost, so the runs fail) as it would have without the calls.
      expect(await f.leases.sweep(64)).toMatchObject({ failed: 2 });
      expect(await f.runs.find(late.run.id)).toMatchObject({ status: 'failed' });
      expect(await f.runs.find(spawning.run.id)).toMatchObject({ status: 'failed' });
    });

    it('the deadline sweeper ends an attempt whose run has a cancel request cancelled, not timed_out', async () => {
      const { run, worker, fence } = await started({
        timeoutMs: 1_000,
        retry: { maxAttempts: 3, initialBackoffMs: 1_000 },
      });
      await f.runs.requestCancel(run.id, { actor: 't', action: 'cancel', target: run.id });
      target.clock.advance(1_000 + GRACE);
      expect(await acts.sweepDeadlines(64, GRACE)).toEqual({ timedOut: 0, retried: 0, cancelled: 1 });
      expect(await f.runs.find(run.id)).toMatchObject({ status: 'cancelled' });
      const [attempt] = await f.db.many<{ status: string; error_code: string | null }>(
        'SELECT status, error_code FROM attempts WHERE run_id = :id',
        { id: run.id },
      );
      expect(attempt).toEqual({ status: 'cancelled', error_code: 'deadline_exceeded' });
      const events = await f.runs.events(run.id, { afterSeq: 0, limit: 50 });
      expect(events.slice(-3).map((e) => [e.type, e.detail])).toEqual([
        ['attempt.deadline_exceeded', { graceMs: GRACE }],
        ['attempt.finished', { status: 'cancelled' }],
        ['run.finished', { status: 'cancelled' }],
      ]);
      expect(await f.leases.findLease(fence.offerId)).toMatchObject({ state: 'expired' });
      expect(await activeLeases(worker)).toBe(0);
    });

    it('a success after a committed cancel request converges to cancelled; start failure retries per policy', async () => {
      const c = await started();
      await f.runs.requestCancel(c.run.id, { actor: 't', action: 'cancel', target: c.run.id });
      const done = await acts.complete({ ...c.fence, outcome: 'succeeded', exitCode: 0, errorSummary: null });
      expect(done).toMatchObject({
        cancelRequested: true,
        snapshot: { runStatus: 'cancelled', attemptStatus: 'cancelled' },
      });

      const r = await claimed({ retry: { maxAttempts: 2, initialBackoffMs: 1_000 } });
      await acts.starting(r.fence);
      const failed = await acts.startFailure({ ...r.fence, errorCode: 'spawn_failed' });
      expect(failed.snapshot).toMatchObject({
        runStatus: 'retry_wait',
        attemptStatus: 'failed',
        errorCode: 'spawn_failed',
      });
      expect(await activeLeases(r.worker)).toBe(0);
      target.clock.advance(1_000);
      expect(await f.leases.sweep(64)).toMatchObject({ retried: 1 });
      expect(offered(await f.pull(r.worker)).attempt.attemptNo).toBe(2);
    });

    it('logs: sequenced, idempotent, capped with one marker, read by position with the run end', async () => {
      const { run, fence } = await claimed();
      await expectFence(
        acts.appendLog({ ...fence, seq: 0, stream: 'stdout', text: 'early' }),
        'lease',
        'attempt_not_starting',
      );
      await acts.starting(fence);
      expect(await acts.appendLog({ ...fence, seq: 0, stream: 'stdout', text: 'a'.repeat(40) })).toEqual({
        runId: run.id,
        outcome: 'stored',
        truncated: false,
      });
      const before = await snapshotDatabase(f.db);
      expect(await acts.appendLog({ ...fence, seq: 0, stream: 'stdout', text: 'a'.repeat(40) })).toEqual({
        runId: run.id,
        outcome: 'replayed',
        truncated: false,
      });
      await expectFence(
        acts.appendLog({ ...fence, seq: 0, stream: 'stdout', text: 'b' }),
        'lease',
        'log_chunk_mismatch',
      );
      await expectFence(
        acts.appendLog({ ...fence, seq: 2, stream: 'stdout', text: 'b' }),
        'lease',
        'log_sequence_gap',
      );
      expect(await snapshotDatabase(f.db)).toEqual(before);
      expect(await acts.appendLog({ ...fence, seq: 1, stream: 'stdout', text: 'é'.repeat(30) })).toEqual({
        runId: run.id,
        outcome: 'stored',
        truncated: false,
      });
      // 40 + 60 bytes stored: the cap (100) is reached, the next chunk becomes the marker.
      expect(await acts.appendLog({ ...fence, seq: 2, stream: 'stdout', text: 'x' })).toEqual({
        runId: run.id,
        outcome: 'dropped',
        truncated: true,
      });
      expect(await acts.appendLog({ ...fence, seq: 3, stream: 'stdout', text: 'y' })).toEqual({
        runId: run.id,
        outcome: 'dropped',
        truncated: true,
      });
      expect(await acts.appendLog({ ...fence, seq: 3, stream: 'stdout', text: 'other' })).toEqual({
        runId: run.id,
        outcome: 'dropped',
        truncated: true,
      });
      const page = await acts.readLogs(run.id, { after: 0, limit: 2 });
      expect(page).toMatchObject({ runEnded: false, truncated: true });
      expect(page!.entries.map((e) => [e.position, e.seq, e.kind])).toEqual([
        [1, 0, 'output'],
        [2, 1, 'output'],
      ]);
      const next = await acts.readLogs(run.id, { after: 2, limit: 10 });
      expect(next!.entries).toHaveLength(1);
      expect(next!.entries[0]).toMatchObject({ position: 3, seq: null, kind: 'truncated' });
      expect(next!.entries[0]!.raw).toContain(`${LOG_CAP} bytes`);
      await acts.running({ ...fence, executorHandle: 'pid:1' });
      await acts.complete({ ...fence, outcome: 'succeeded', exitCode: 0, errorSummary: null });
      await expectFence(
        acts.appendLog({ ...fence, seq: 4, stream: 'stdout', text: 'late' }),
        'lease',
        'lease_not_active',
      );
      expect(
        await acts.appendLog({ ...fence, seq: 0, stream: 'stdout', text: 'a'.repeat(40) }),
      ).toMatchObject({
        outcome: 'replayed',
      });
      expect(await acts.readLogs(run.id, { after: 3, limit: 10 })).toEqual({
        entries: [],
        runEnded: true,
        truncated: true,
      });
      expect(await acts.readLogs(f.ids.uuidV7(), { after: 0, limit: 10 })).toBeNull();
      expect(RUN_LOG_LIMITS.defaultRunCapBytes).toBe(1024 * 1024);
    });

    it('deadline: past deadline + grace the sweeper times the attempt out, fences its lease and returns the slot', async () => {
      const { run, worker, fence } = await started({ timeoutMs: 1_000 });
      const plain = await claimed(
        { timeoutMs: 1_000, retry: { maxAttempts: 2, initialBackoffMs: 1_000 } },
        worker,
      );
      await acts.starting(plain.fence);
      target.clock.advance(1_000 + GRACE - 1);
      expect(await acts.sweepDeadlines(64, GRACE)).toEqual({ timedOut: 0, retried: 0, cancelled: 0 });
      target.clock.advance(1);
      expect(await acts.sweepDeadlines(64, GRACE)).toEqual({ timedOut: 1, retried: 1, cancelled: 0 });
      expect(await f.runs.find(run.id)).toMatchObject({ status: 'timed_out' });
      expect(await f.runs.find(plain.run.id)).toMatchObject({ status: 'retry_wait' });
      expect(await f.leases.findLease(fence.offerId)).toMatchObject({ state: 'expired' });
      expect(await activeLeases(worker)).toBe(0);
      expect((await eventTypes(run.id)).slice(-3)).toEqual([
        'attempt.deadline_exceeded',
        'attempt.finished',
        'run.finished',
      ]);
      await expectFence(f.leases.renew({ ...fence, leaseMs: RUN_LEASE }), 'lease', 'lease_not_active');
      const late = await acts.complete({ ...fence, outcome: 'succeeded', exitCode: 0, errorSummary: null });
      expect(late.snapshot).toMatchObject({ attemptStatus: 'timed_out', errorCode: 'deadline_exceeded' });
    });

    it('callbackSequence counts the acknowledgements applied: a deadline timeout and a lease expiry both leave it at 2', async () => {
      const complete = { outcome: 'succeeded' as const, exitCode: 0, errorSummary: null };
      // Both attempts sent starting and running only; then the control plane ended each one.
      const timedOut = await started({ timeoutMs: 1_000 });
      target.clock.advance(1_000 + GRACE);
      expect(await acts.sweepDeadlines(64, GRACE)).toMatchObject({ timedOut: 1 });
      const lost = await started();
      target.clock.advance(RUN_LEASE + 1);
      expect(await f.leases.sweep(64)).toMatchObject({ failed: 1 });
      for (const [c, attemptStatus] of [
        [timedOut, 'timed_out'],
        [lost, 'lost'],
      ] as const) {
        const late = await acts.complete({ ...c.fence, ...complete });
        expect(late).toMatchObject({
          status: 'already_terminal',
          snapshot: { attemptStatus, callbackSequence: 2 },
        });
        const row = await f.db.one<{ seq: number | string; final: string | null }>(
          'SELECT callback_seq AS seq, ack_final AS final FROM attempts WHERE id = :id',
          { id: c.offer.attempt.id },
        );
        expect({ seq: Number(row!.seq), final: row!.final }).toEqual({ seq: 2, final: null });
      }
    });

    it('deadline: two replicas sweeping at once end each attempt exactly once', async () => {
      const worker = await f.worker(workerId(), 20);
      const runs = [];
      for (let i = 0; i < 20; i++) {
        const c = await claimed({ timeoutMs: 1_000 }, worker);
        await acts.starting(c.fence);
        runs.push(c.run);
      }
      target.clock.advance(1_000 + GRACE);
      const second = new SqlActivationRepository(await target.openSecond());
      const results = await Promise.all([
        acts.sweepDeadlines(64, GRACE),
        second.sweepDeadlines(64, GRACE),
        acts.sweepDeadlines(64, GRACE),
      ]);
      expect(results.reduce((sum, r) => sum + r.timedOut, 0)).toBe(20);
      expect(await f.count('run_events', `type = 'attempt.deadline_exceeded'`)).toBe(20);
      expect(await f.count('runs', `status = 'timed_out'`)).toBe(20);
      expect(await activeLeases(worker)).toBe(0);
      expect((await acts.sweepDeadlines(2, GRACE)).timedOut).toBe(0);
    });

    it('cancel intents: the attempts of this session whose run has a cancel request', async () => {
      const worker = await f.worker(workerId());
      const a = await claimed({}, worker);
      const b = await claimed({}, worker);
      await acts.starting(a.fence);
      expect(await acts.cancelIntents(worker.workerId, worker.sessionId, 16)).toEqual([]);
      await f.runs.requestCancel(a.run.id, { actor: 't', action: 'cancel', target: a.run.id });
      await f.runs.requestCancel(b.run.id, { actor: 't', action: 'cancel', target: b.run.id });
      const ids = [a.offer.attempt.id, b.offer.attempt.id].sort();
      expect(await acts.cancelIntents(worker.workerId, worker.sessionId, 16)).toEqual(ids);
      expect(await acts.cancelIntents(worker.workerId, worker.sessionId, 1)).toEqual(ids.slice(0, 1));
      expect(await acts.cancelIntents(worker.workerId, newSessionId(), 16)).toEqual([]);
      expect((await acts.running({ ...a.fence, executorHandle: 'pid:1' })).cancelRequested).toBe(true);
    });

    it("restart recovery: the worker's next session ends its predecessor's attempts with their tokens; nothing else may (ADR 0015)", async () => {
      const old = await f.worker(workerId(), 3);
      const running = await claimed({}, old);
      await acts.starting(running.fence);
      await acts.running({ ...running.fence, executorHandle: 'local-process:77' });
      const starting = await claimed({}, old);
      await acts.starting(starting.fence);
      const unstarted = await claimed({}, old);
      // The old lease was renewed twice: the successor does not know the version, and needs not.
      await f.leases.renew({ ...f.leaseCommand(old, running.offer, running.token) });
      await f.leases.renew({ ...f.leaseCommand(old, running.offer, running.token), leaseVersion: 1 });
      const next = await f.sessions.register({
        workerId: old.workerId,
        sessionId: newSessionId(),
        snapshot: snapshot({ maxConcurrentRuns: 3, availableSlots: 3 }),
        leaseMs: SESSION_LEASE,
      });
      const successor = (c: { fence: LeaseFenceCommand }): LeaseFenceCommand => ({
        ...c.fence,
        sessionId: next.session.sessionId,
        fence: { generation: next.session.generation, expectedVersion: next.session.version },
        leaseVersion: 0,
      });
      const restarted = { outcome: 'failed', exitCode: null, errorSummary: 'worker_restarted' } as const;

      // Refused, changing nothing: the predecessor's steps other than the ending ones, a wrong token,
      // another worker's session with the right token, the predecessor itself.
      const other = await f.worker(workerId('other'));
      const otherSession = {
        ...running.fence,
        workerId: other.workerId,
        sessionId: other.sessionId,
        fence: other.fence,
      };
      const before = await snapshotDatabase(f.db);
      for (const [name, call, area, reason] of [
        ['starting', () => acts.starting(successor(unstarted)), 'lease', 'lease_token_mismatch'],
        [
          'running',
          () => acts.running({ ...successor(starting), executorHandle: 'x:1' }),
          'lease',
          'lease_token_mismatch',
        ],
        [
          'logs',
          () => acts.appendLog({ ...successor(running), seq: 0, stream: 'stdout', text: 'x' }),
          'lease',
          'lease_token_mismatch',
        ],
        [
          'renew',
          () => f.leases.renew({ ...successor(running), leaseMs: RUN_LEASE }),
          'lease',
          'lease_token_mismatch',
        ],
        [
          'wrong token',
          () =>
            acts.complete({ ...successor(running), tokenDigest: leaseTokenDigest(newToken()), ...restarted }),
          'lease',
          'lease_token_mismatch',
        ],
        [
          'other worker',
          () => acts.complete({ ...otherSession, ...restarted }),
          'lease',
          'lease_token_mismatch',
        ],
        [
          'predecessor',
          () => acts.complete({ ...running.fence, ...restarted }),
          'session',
          'session_replaced',
        ],
      ] as const) {
        await expect({
          name,
          error: await (call() as Promise<unknown>).catch((e: unknown) => e),
        }).toMatchObject({
          name,
          error: { area, reason },
        });
      }
      expect(await snapshotDatabase(f.db)).toEqual(before);

      // The ending steps and the release, from the successor: applied at once, no lease term to wait for.
      expect(await acts.complete({ ...successor(running), ...restarted })).toMatchObject({
        status: 'applied',
        snapshot: { attemptStatus: 'failed' },
      });
      expect(
        await acts.startFailure({ ...successor(starting), errorCode: 'worker_restarted' }),
      ).toMatchObject({
        status: 'applied',
      });
      expect((await f.leases.release({ ...successor(unstarted), leaseMs: RUN_LEASE })).state).toBe(
        'released',
      );
      expect(await f.runs.find(running.run.id)).toMatchObject({ status: 'failed' });
      expect(await f.runs.find(starting.run.id)).toMatchObject({ status: 'failed' });
      expect(await f.runs.find(unstarted.run.id)).toMatchObject({ status: 'queued' });
      // The successor's own capacity was never the predecessor's: still all free.
      expect(await activeLeases(old)).toBe(0);
      // A replay of the successor's report is recognised; the sweeper finds nothing left to end.
      expect(await acts.complete({ ...successor(running), ...restarted })).toMatchObject({
        status: 'already_terminal',
      });
      target.clock.advance(RUN_LEASE + 1);
      expect(await f.leases.sweep(64)).toMatchObject({ lost: 0, requeued: 0 });
    });

    it('replacement: the new session has its full capacity; the old attempt is retried only after its lease expired', async () => {
      const old = await f.worker(workerId(), 2);
      const a = await claimed({ retry: { maxAttempts: 2, initialBackoffMs: 1_000 } }, old);
      await claimed({}, old);
      await acts.starting(a.fence);
      const replaced = await f.sessions.register({
        workerId: old.workerId,
        sessionId: newSessionId(),
        snapshot: snapshot({ maxConcurrentRuns: 2, availableSlots: 2 }),
        leaseMs: SESSION_LEASE,
      });
      const fresh = {
        workerId: old.workerId,
        sessionId: replaced.session.sessionId,
        fence: { generation: replaced.session.generation, expectedVersion: replaced.session.version },
      };
      target.clock.advance(RUN_LEASE / 2);
      await f.queue((await f.task()).id, 3);
      offered(await f.pull(fresh));
      offered(await f.pull(fresh));
      expect(await f.pull(fresh)).toMatchObject({ kind: 'idle', reason: 'no_capacity', activeLeases: 2 });
      // The old session's started attempt keeps its lease until its term ends; only then is it retried,
      // and its expiry gives nothing back to the new session's count.
      expect(await f.leases.sweep(64)).toMatchObject({ lost: 0, requeued: 0 });
      expect(await f.runs.find(a.run.id)).toMatchObject({ status: 'dispatching' });
      target.clock.advance(RUN_LEASE / 2 + 1);
      expect(await f.leases.sweep(64)).toMatchObject({ lost: 1, requeued: 1 });
      expect(await f.runs.find(a.run.id)).toMatchObject({ status: 'retry_wait' });
      expect(await activeLeases(old)).toBe(2);
    });
  });
}
