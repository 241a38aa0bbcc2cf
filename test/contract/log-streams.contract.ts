// ADR 0032: a run's output keeps the stream of each chunk and the text as the task wrote it, on both
// dialects; rows stored before the stream column read back as a null stream, their text untouched.
import { LeaseFenceCommand } from '@ql/domain';
import { SqlActivationRepository } from '@ql/persistence';
import type { QueryRunner } from 'typeorm';
import { downLogStreams, upLogStreams } from '../../migrations/log-streams';
import { snapshotDatabase } from '../support/db-snapshot';
import { DispatchFixture, DispatchTarget, expectFence, newToken, offered } from './dispatch.contract';

const LOG_CAP = 200;
/** What a task can print that a terminal or a browser would interpret. */
const RAW = 'red \u001b[31mX\u001b[0m\rfake\u202egnp.exe a\u200bb\ttab\n';

export function describeLogStreamsContract(dialect: string, makeTarget: () => DispatchTarget): void {
  describe(`run log streams (${dialect})`, () => {
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

    /** A run of a fresh task, claimed by a fresh worker and started: its lease fence and attempt. */
    async function starting() {
      const t = await f.task({ timeoutMs: 60_000 });
      const [run] = await f.queue(t.id, 1);
      const w = await f.worker(`streams-${dialect}-${++n}`);
      const token = newToken();
      const offer = offered(await f.pull(w, f.ids.uuidV7(), token));
      const fence: LeaseFenceCommand = (({ leaseMs: _leaseMs, ...rest }) => rest)(
        f.leaseCommand(w, offer, token),
      );
      await acts.starting(fence);
      return { runId: run!.id, attemptId: (await f.runs.find(run!.id))!.currentAttemptId!, fence };
    }

    const entries = async (runId: string) =>
      (await acts.readLogs(runId, { after: 0, limit: 100 }))!.entries.map((e) => [
        e.seq,
        e.kind,
        e.stream,
        e.raw,
      ]);

    it('keeps each chunk’s stream and its text as written; the marker is system', async () => {
      const { runId, fence } = await starting();
      await acts.appendLog({ ...fence, seq: 0, stream: 'stdout', text: RAW });
      await acts.appendLog({ ...fence, seq: 1, stream: 'stderr', text: `err ${RAW}` });
      await acts.appendLog({ ...fence, seq: 2, stream: 'system', text: '[worker marker]' });
      await acts.appendLog({ ...fence, seq: 3, stream: null, text: 'from a worker that does not say\n' });
      expect(
        await acts.appendLog({ ...fence, seq: 4, stream: 'stdout', text: 'x'.repeat(LOG_CAP) }),
      ).toMatchObject({
        outcome: 'dropped',
        truncated: true,
      });
      const read = await entries(runId);
      expect(read.slice(0, 4)).toEqual([
        [0, 'output', 'stdout', RAW],
        [1, 'output', 'stderr', `err ${RAW}`],
        [2, 'output', 'system', '[worker marker]'],
        [3, 'output', null, 'from a worker that does not say\n'],
      ]);
      expect(read[4]).toEqual([null, 'truncated', 'system', expect.stringContaining('log cap')]);
    });

    it('the same seq and text from another stream is not a replay: refused, nothing written', async () => {
      const { fence } = await starting();
      await acts.appendLog({ ...fence, seq: 0, stream: 'stdout', text: 'line\n' });
      expect(await acts.appendLog({ ...fence, seq: 0, stream: 'stdout', text: 'line\n' })).toMatchObject({
        outcome: 'replayed',
      });
      const before = await snapshotDatabase(f.db);
      for (const stream of ['stderr', 'system', null] as const)
        await expectFence(
          acts.appendLog({ ...fence, seq: 0, stream, text: 'line\n' }),
          'lease',
          'log_chunk_mismatch',
        );
      expect(await snapshotDatabase(f.db)).toEqual(before);
    });

    it('the database refuses a stream outside stdout|stderr|system', async () => {
      const { runId, attemptId } = await starting();
      const refused = await f.db
        .run(
          `INSERT INTO run_logs (run_id, position, attempt_id, seq, kind, stream, text, at)
           VALUES (:runId, 1, :attemptId, 0, 'output', 'STDOUT', 'x', {now})`,
          { runId, attemptId },
        )
        .then(
          (changes) => ({ changes }),
          // The driver's error may come from another realm than jest's Error: read its message.
          (error: unknown) => ({ message: String((error as { message?: unknown }).message) }),
        );
      expect(refused).toEqual({ message: expect.stringMatching(/check constraint/i) });
      expect(await entries(runId)).toEqual([]);
    });

    it('rows stored before the stream column read back with a null stream and their text untouched', async () => {
      const { runId, attemptId, fence } = await starting();
      const q = { query: (sql: string) => f.db.run(sql) } as unknown as QueryRunner;
      await downLogStreams(q);
      try {
        // Written as the code before ADR 0032 wrote it: no stream column.
        await f.db.run(
          `INSERT INTO run_logs (run_id, position, attempt_id, seq, kind, text, at)
           VALUES (:runId, 1, :attemptId, 0, 'output', :text, {now})`,
          { runId, attemptId, text: RAW },
        );
        await f.db.run('UPDATE attempts SET log_next_seq = 1 WHERE id = :attemptId', { attemptId });
      } finally {
        await upLogStreams(q);
      }
      await acts.appendLog({ ...fence, seq: 1, stream: 'stderr', text: 'after\n' });
      expect(await entries(runId)).toEqual([
        [0, 'output', null, RAW],
        [1, 'output', 'stderr', 'after\n'],
      ]);
    });
  });
}
