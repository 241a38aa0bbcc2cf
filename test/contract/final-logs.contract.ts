// ADR 0044 (issue 17 item 3): a completion may carry the attempt's last output. The chunks are stored
// as the `logs` route stores them, in the completion's transaction and before its state change, on
// both dialects: a refused completion stores none of them, and only the identical body replays.
import { CompletionCommand, FinalLogChunk, LeaseFenceCommand } from '@ql/domain';
import { SqlActivationRepository } from '@ql/persistence';
import { snapshotDatabase } from '../support/db-snapshot';
import { SUCCEEDED_RUN_EVENTS, newSessionId, snapshot } from '../support/fixtures';
import { DispatchFixture, DispatchTarget, RUN_LEASE, SESSION_LEASE, expectFence } from './dispatch.contract';

const LOG_CAP = 100;
/** What a task can print that a terminal would interpret: stored as written (ADR 0032). */
const RAW = 'red \u001b[31mX\u001b[0m\rfake\u202egnp.exe\n';
const SUCCEEDED = { outcome: 'succeeded', exitCode: 0, errorSummary: null } as const;

export function describeFinalLogsContract(dialect: string, makeTarget: () => DispatchTarget): void {
  describe(`completion with its final output (${dialect})`, () => {
    let target: DispatchTarget;
    let f: DispatchFixture;
    let acts: SqlActivationRepository;
    let n = 0;

    beforeAll(async () => {
      target = makeTarget();
      f = new DispatchFixture(await target.open());
      acts = new SqlActivationRepository(f.db, { logCapBytes: LOG_CAP });
    });
    afterAll(async () => {
      await target.dispose();
    });
    afterEach(async () => {
      await f.expectSlotCountersMatch();
    });

    /** A run of a fresh task, claimed by a fresh worker and acknowledged starting (and running). */
    async function held(step: 'starting' | 'running' = 'running') {
      const c = await f.claimedRun(`final-${dialect}-${++n}`, { timeoutMs: 60_000 });
      await acts.starting(c.fence);
      if (step === 'running') await acts.running({ ...c.fence, executorHandle: 'local-process:42' });
      return { ...c, runId: c.run.id, attemptId: c.offer.attempt.id };
    }

    type Ending = Pick<CompletionCommand, 'outcome' | 'exitCode' | 'errorSummary'>;
    const complete = (fence: LeaseFenceCommand, finalLogs: FinalLogChunk[], ending: Ending = SUCCEEDED) =>
      acts.complete({ ...fence, ...ending, finalLogs } satisfies CompletionCommand);
    const entries = async (runId: string) =>
      (await acts.readLogs(runId, { after: 0, limit: 100 }))!.entries.map((e) => [
        e.seq,
        e.kind,
        e.stream,
        e.raw,
      ]);
    const attemptRow = (id: string) =>
      f.db.one<Record<string, unknown>>('SELECT * FROM attempts WHERE id = :id', { id });

    it('stores the chunks after those sent as logs, in order with their streams, and ends the run as a completion does', async () => {
      const { runId, fence } = await held();
      await acts.appendLog({ ...fence, seq: 0, stream: 'stdout', text: 'first\n' });
      const done = await complete(fence, [
        { seq: 1, stream: 'stderr', text: RAW },
        { seq: 2, stream: 'stdout', text: 'last\n' },
      ]);
      expect(done).toMatchObject({
        status: 'applied',
        snapshot: { runStatus: 'succeeded', attemptStatus: 'succeeded', callbackSequence: 3 },
      });
      expect(await entries(runId)).toEqual([
        [0, 'output', 'stdout', 'first\n'],
        [1, 'output', 'stderr', RAW],
        [2, 'output', 'stdout', 'last\n'],
      ]);
      expect(await acts.readLogs(runId, { after: 3, limit: 10 })).toEqual({
        entries: [],
        runEnded: true,
        truncated: false,
      });
      expect((await f.runs.events(runId, { afterSeq: 0, limit: 50 })).map((e) => e.type)).toEqual(
        SUCCEEDED_RUN_EVENTS,
      );
      expect(await f.leases.findLease(fence.offerId)).toMatchObject({ state: 'completed' });
    });

    it('past the run’s cap the chunks are kept as the logs route keeps them: one marker, the rest dropped', async () => {
      const { runId, fence } = await held();
      await complete(fence, [
        { seq: 0, stream: 'stdout', text: 'a'.repeat(60) },
        { seq: 1, stream: 'stdout', text: 'b'.repeat(60) },
        { seq: 2, stream: 'stderr', text: 'c' },
      ]);
      expect(await entries(runId)).toEqual([
        [0, 'output', 'stdout', 'a'.repeat(60)],
        [null, 'truncated', 'system', expect.stringContaining(`${LOG_CAP} bytes`)],
      ]);
      expect((await acts.readLogs(runId, { after: 0, limit: 1 }))!.truncated).toBe(true);
    });

    it('an identical replay writes nothing; the same completion with other chunks, or none, is 409', async () => {
      const { fence } = await held();
      const chunks: FinalLogChunk[] = [
        { seq: 0, stream: 'stdout', text: 'one\n' },
        { seq: 1, stream: 'stderr', text: 'two\n' },
      ];
      const done = await complete(fence, chunks);
      const before = await snapshotDatabase(f.db);
      expect(await complete(fence, chunks)).toEqual({ ...done, status: 'already_terminal' });
      for (const other of [
        [chunks[0]!, { ...chunks[1]!, text: 'TWO\n' }],
        [chunks[0]!, { ...chunks[1]!, stream: 'stdout' as const }],
        chunks.slice(0, 1),
        [...chunks, { seq: 2, stream: 'stdout' as const, text: 'three\n' }],
        [],
      ])
        await expectFence(complete(fence, other), 'lease', 'acknowledgement_mismatch');
      expect(await snapshotDatabase(f.db)).toEqual(before);
    });

    it('a completion without final chunks replays as before: its digest is the one it always had', async () => {
      const { fence } = await held();
      const done = await acts.complete({ ...fence, ...SUCCEEDED });
      const before = await snapshotDatabase(f.db);
      expect(await complete(fence, [])).toEqual({ ...done, status: 'already_terminal' });
      expect(await snapshotDatabase(f.db)).toEqual(before);
    });

    it.each<[string, (seq0: number) => FinalLogChunk[], string]>([
      ['a gap after the stored chunks', () => [{ seq: 2, stream: 'stdout', text: 'x' }], 'log_sequence_gap'],
      [
        'a gap between two chunks',
        () => [
          { seq: 1, stream: 'stdout', text: 'x' },
          { seq: 3, stream: 'stdout', text: 'y' },
        ],
        'log_sequence_gap',
      ],
      [
        'chunks out of order',
        () => [
          { seq: 2, stream: 'stdout', text: 'y' },
          { seq: 1, stream: 'stdout', text: 'x' },
        ],
        'log_sequence_gap',
      ],
      [
        'a stored seq with other text',
        () => [
          { seq: 0, stream: 'stdout', text: 'not what was stored\n' },
          { seq: 1, stream: 'stdout', text: 'x' },
        ],
        'log_chunk_mismatch',
      ],
    ])(
      '%s is refused as the logs route refuses it, and nothing is written',
      async (_what, chunks, reason) => {
        const { runId, attemptId, fence } = await held();
        await acts.appendLog({ ...fence, seq: 0, stream: 'stdout', text: 'stored\n' });
        const before = await snapshotDatabase(f.db);
        await expectFence(complete(fence, chunks(1)), 'lease', reason);
        expect(await snapshotDatabase(f.db)).toEqual(before);
        expect(await entries(runId)).toEqual([[0, 'output', 'stdout', 'stored\n']]);
        expect(await attemptRow(attemptId)).toMatchObject({ status: 'running' });
        // The same completion with the chunks in sequence is then applied.
        await complete(fence, [{ seq: 1, stream: 'stdout', text: 'x' }]);
        expect(await entries(runId)).toEqual([
          [0, 'output', 'stdout', 'stored\n'],
          [1, 'output', 'stdout', 'x'],
        ]);
      },
    );

    it('a refused completion stores none of its chunks: stale lease version, before running, replaced session, successor session', async () => {
      const chunks: FinalLogChunk[] = [
        { seq: 0, stream: 'stdout', text: 'out\n' },
        { seq: 1, stream: 'stderr', text: 'err\n' },
      ];
      // A lease renewed twice: version 0 is two renewals behind.
      const stale = await held();
      const renewed = await f.leases.renew({ ...stale.fence, leaseMs: RUN_LEASE });
      await f.leases.renew({ ...stale.fence, leaseVersion: renewed.lease.version, leaseMs: RUN_LEASE });
      // Still starting: the logs route would take the chunks, the completion is refused.
      const starting = await held('starting');
      // Replaced: a new session of the same worker, and the successor reporting with chunks.
      const replaced = await held();
      const next = await f.sessions.register({
        workerId: replaced.worker.workerId,
        sessionId: newSessionId(),
        snapshot: snapshot(),
        leaseMs: SESSION_LEASE,
      });
      const successor: LeaseFenceCommand = {
        ...replaced.fence,
        sessionId: next.session.sessionId,
        fence: { generation: next.session.generation, expectedVersion: next.session.version },
      };
      const before = await snapshotDatabase(f.db);
      await expectFence(complete(stale.fence, chunks), 'lease', 'lease_version_mismatch');
      await expectFence(complete(starting.fence, chunks), 'lease', 'attempt_not_running');
      await expectFence(complete(replaced.fence, chunks), 'session', 'session_replaced');
      // Restart recovery may end the predecessor's attempt (ADR 0015), but output only the holder sends.
      await expectFence(complete(successor, chunks), 'lease', 'lease_token_mismatch');
      expect(await snapshotDatabase(f.db)).toEqual(before);
      for (const c of [stale, starting, replaced]) expect(await entries(c.runId)).toEqual([]);
      // Without output, the successor's report is still the restart recovery it always was.
      const failed = { outcome: 'failed', exitCode: null, errorSummary: 'worker_restarted' } as const;
      expect(await complete(successor, [], failed)).toMatchObject({ status: 'applied' });
    });

    it('a late completion (the sweeper ended the attempt first) records its one event and stores no chunk', async () => {
      const { runId, fence } = await held();
      target.clock.advance(RUN_LEASE + 1);
      await f.leases.sweep(64);
      expect(await f.runs.find(runId)).toMatchObject({ status: 'failed' });
      const tables = ['attempts', 'run_leases', 'run_logs', 'workers'];
      const before = await snapshotDatabase(f.db, tables);
      const late = await complete(fence, [{ seq: 0, stream: 'stdout', text: 'too late\n' }]);
      expect(late).toMatchObject({ status: 'already_terminal', snapshot: { attemptStatus: 'lost' } });
      expect(await snapshotDatabase(f.db, tables)).toEqual(before);
      const types = (await f.runs.events(runId, { afterSeq: 0, limit: 50 })).map((e) => e.type);
      expect(types.at(-1)).toBe('attempt.late_callback_ignored');
    });
  });
}
