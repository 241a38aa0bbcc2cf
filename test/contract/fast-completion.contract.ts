// ADR 0047 (issue 17): a worker whose run ended before its `running` report sends only the completion,
// with `executorHandle`. The control plane then applies `running` and the completion in one
// transaction (on PostgreSQL in the one `ql_lease_step` statement), as if both had come: the same
// rows, events and answers on both dialects, the same replays and refusals.
import { CompletionCommand, FinalLogChunk, LeaseFenceCommand, runningDigest, stepDigest } from '@ql/domain';
import { SqlActivationRepository } from '@ql/persistence';
import { snapshotDatabase } from '../support/db-snapshot';
import { SUCCEEDED_RUN_EVENTS } from '../support/fixtures';
import { DispatchFixture, DispatchTarget, RUN_LEASE, expectFence } from './dispatch.contract';

const HANDLE = 'local-process:4242';
const SUCCEEDED = { outcome: 'succeeded', exitCode: 0, errorSummary: null } as const;
const FAILED = { outcome: 'failed', exitCode: 3, errorSummary: 'exited with code 3' } as const;
type Ending = Pick<CompletionCommand, 'outcome' | 'exitCode' | 'errorSummary'>;

export function describeFastCompletionContract(dialect: string, makeTarget: () => DispatchTarget): void {
  describe(`a completion that stands in for running (${dialect})`, () => {
    let target: DispatchTarget;
    let f: DispatchFixture;
    let acts: SqlActivationRepository;
    let n = 0;

    beforeAll(async () => {
      target = makeTarget();
      f = new DispatchFixture(await target.open());
      acts = new SqlActivationRepository(f.db);
    });
    afterAll(async () => {
      await target.dispose();
    });
    afterEach(async () => {
      await f.expectSlotCountersMatch();
    });

    /** A run of a fresh task, claimed by a fresh worker and acknowledged `starting`. */
    async function starting(task: Record<string, unknown> = {}) {
      const c = await f.claimedRun(`fast-${dialect}-${++n}`, { timeoutMs: 60_000, ...task });
      await acts.starting(c.fence);
      return { ...c, runId: c.run.id, attemptId: c.offer.attempt.id };
    }
    const complete = (
      fence: LeaseFenceCommand,
      ending: Ending = SUCCEEDED,
      extra: Pick<CompletionCommand, 'executorHandle' | 'finalLogs'> = { executorHandle: HANDLE },
    ) => acts.complete({ ...fence, ...ending, ...extra });
    const events = async (runId: string) =>
      (await f.runs.events(runId, { afterSeq: 0, limit: 50 })).map((e) => e.type);
    const attemptRow = (id: string) =>
      f.db.one<Record<string, unknown>>(
        `SELECT status, version, executor_handle, callback_seq, ack_running, ack_final, exit_code
         FROM attempts WHERE id = :id`,
        { id },
      );
    /** Statements `call` sent (BEGIN and COMMIT count) and its result. */
    async function counted<T>(call: () => Promise<T>): Promise<[number, T]> {
      const before = f.db.statements.value;
      const result = await call();
      return [f.db.statements.value - before, result];
    }

    it('on a starting attempt: running and the completion are applied together, as if both had come', async () => {
      const { runId, attemptId, fence } = await starting();
      const [statements, done] = await counted(() => complete(fence));
      expect(done).toMatchObject({
        status: 'applied',
        snapshot: {
          runStatus: 'succeeded',
          attemptStatus: 'succeeded',
          callbackSequence: 3,
          executorHandle: HANDLE,
          finishedAt: expect.any(Number),
        },
      });
      // ADR 0017: applied on PostgreSQL in one statement, as any applied step.
      if (dialect === 'postgres') expect(statements).toBe(1);
      expect(await events(runId)).toEqual(SUCCEEDED_RUN_EVENTS);
      expect(await attemptRow(attemptId)).toMatchObject({
        status: 'succeeded',
        executor_handle: HANDLE,
        ack_running: runningDigest(HANDLE),
        ack_final: stepDigest({ step: 'completion', ...SUCCEEDED, executorHandle: HANDLE }),
      });
      expect(Number((await attemptRow(attemptId))!.callback_seq)).toBe(3);
      expect(await f.runs.find(runId)).toMatchObject({ status: 'succeeded', finishedAt: expect.any(Number) });
      expect(await f.leases.findLease(fence.offerId)).toMatchObject({ state: 'completed' });
    });

    it('an identical replay, and a later running with that handle, answer already_terminal and write nothing', async () => {
      const { fence } = await starting();
      const done = await complete(fence);
      const before = await snapshotDatabase(f.db);
      expect(await complete(fence)).toEqual({ ...done, status: 'already_terminal' });
      expect(await acts.running({ ...fence, executorHandle: HANDLE })).toEqual({
        ...done,
        status: 'already_terminal',
      });
      expect(await acts.starting(fence)).toEqual({ ...done, status: 'already_terminal' });
      // Another handle, another outcome, the same outcome without the handle: not this completion.
      await expectFence(
        acts.running({ ...fence, executorHandle: 'local-process:1' }),
        'lease',
        'acknowledgement_mismatch',
      );
      await expectFence(complete(fence, FAILED), 'lease', 'acknowledgement_mismatch');
      await expectFence(complete(fence, SUCCEEDED, {}), 'lease', 'acknowledgement_mismatch');
      await expectFence(
        acts.startFailure({ ...fence, errorCode: 'spawn_failed' }),
        'lease',
        'acknowledgement_mismatch',
      );
      expect(await snapshotDatabase(f.db)).toEqual(before);
    });

    it('once running with the same handle is recorded it is a completion like any other; another handle is refused', async () => {
      const same = await starting();
      await acts.running({ ...same.fence, executorHandle: HANDLE });
      const [statements, done] = await counted(() => complete(same.fence));
      expect(done).toMatchObject({
        status: 'applied',
        snapshot: { attemptStatus: 'succeeded', callbackSequence: 3 },
      });
      if (dialect === 'postgres') expect(statements).toBe(1);
      expect(await events(same.runId)).toEqual(SUCCEEDED_RUN_EVENTS);

      const other = await starting();
      await acts.running({ ...other.fence, executorHandle: 'local-process:1' });
      const before = await snapshotDatabase(f.db);
      await expectFence(complete(other.fence), 'lease', 'acknowledgement_mismatch');
      expect(await snapshotDatabase(f.db)).toEqual(before);
    });

    it('refused without the handle while starting (as before), and with it before starting, writing nothing', async () => {
      const { attemptId, fence } = await starting();
      const claimed = await f.claimedRun(`fast-${dialect}-${++n}`, { timeoutMs: 60_000 });
      const before = await snapshotDatabase(f.db);
      await expectFence(complete(fence, SUCCEEDED, {}), 'lease', 'attempt_not_running');
      await expectFence(complete(claimed.fence), 'lease', 'attempt_not_starting');
      expect(await snapshotDatabase(f.db)).toEqual(before);
      expect(await attemptRow(attemptId)).toMatchObject({ status: 'starting', ack_running: null });
    });

    it('fenced as every lease call is: stale lease version, expired lease, other token, replaced session', async () => {
      const stale = await starting();
      const renewed = await f.leases.renew({ ...stale.fence, leaseMs: RUN_LEASE });
      await f.leases.renew({ ...stale.fence, leaseVersion: renewed.lease.version, leaseMs: RUN_LEASE });
      const token = await starting();
      const replaced = await starting();
      await f.successor(replaced.fence);
      const before = await snapshotDatabase(f.db);
      await expectFence(complete(stale.fence), 'lease', 'lease_version_mismatch');
      await expectFence(
        complete({ ...token.fence, tokenDigest: replaced.fence.tokenDigest }),
        'lease',
        'lease_token_mismatch',
      );
      await expectFence(complete(replaced.fence), 'session', 'session_replaced');
      expect(await snapshotDatabase(f.db)).toEqual(before);
      const expiring = await starting();
      target.clock.advance(RUN_LEASE + 1);
      await expectFence(complete(expiring.fence), 'lease', 'lease_expired');
    });

    it('carries the final output: stored before the state change, in order; the identical body replays', async () => {
      const { runId, fence } = await starting();
      const finalLogs: FinalLogChunk[] = [
        { seq: 0, stream: 'stdout', text: 'one\n' },
        { seq: 1, stream: 'stderr', text: 'two\n' },
      ];
      const done = await complete(fence, SUCCEEDED, { executorHandle: HANDLE, finalLogs });
      expect(done).toMatchObject({ status: 'applied', snapshot: { attemptStatus: 'succeeded' } });
      const page = (await acts.readLogs(runId, { after: 0, limit: 10 }))!;
      expect(page.entries.map((e) => [e.seq, e.stream, e.raw])).toEqual([
        [0, 'stdout', 'one\n'],
        [1, 'stderr', 'two\n'],
      ]);
      expect(page.runEnded).toBe(true);
      expect(await events(runId)).toEqual(SUCCEEDED_RUN_EVENTS);
      const before = await snapshotDatabase(f.db);
      expect(await complete(fence, SUCCEEDED, { executorHandle: HANDLE, finalLogs })).toEqual({
        ...done,
        status: 'already_terminal',
      });
      expect(await snapshotDatabase(f.db)).toEqual(before);
    });

    it('a failure retries per the policy, a cancel request wins, and the successor session reports it at restart', async () => {
      const retry = { maxAttempts: 2, initialBackoffMs: 1_000, multiplier: 2, maxBackoffMs: 10_000 };
      const failing = await starting({ retry });
      expect(await complete(failing.fence, FAILED)).toMatchObject({
        status: 'applied',
        snapshot: { runStatus: 'retry_wait', attemptStatus: 'failed' },
      });
      expect((await events(failing.runId)).slice(-4)).toEqual([
        'attempt.running',
        'run.running',
        'attempt.finished',
        'run.retry_scheduled',
      ]);

      const cancelled = await starting();
      await f.runs.requestCancel(cancelled.runId, { actor: 't', action: 'cancel', target: cancelled.runId });
      expect(await complete(cancelled.fence)).toMatchObject({
        snapshot: { runStatus: 'cancelled', attemptStatus: 'cancelled' },
      });

      // Restart recovery (ADR 0015): the next session reports the recorded outcome with the handle.
      const old = await starting();
      expect(await complete(await f.successor(old.fence))).toMatchObject({
        status: 'applied',
        snapshot: { runStatus: 'succeeded', attemptStatus: 'succeeded', executorHandle: HANDLE },
      });
      expect(await events(old.runId)).toEqual(SUCCEEDED_RUN_EVENTS);
    });
  });
}
