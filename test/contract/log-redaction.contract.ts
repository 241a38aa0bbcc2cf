// The control plane's redaction of stored output across chunks (issue 27, ADR 0050) on both dialects:
// a value a non-redacting worker splits between two chunks, on one replica or two, is never stored,
// replays stay idempotent, the held end is stored as the attempt ends; the error summary is redacted;
// a run cancelled while `starting` gets no secrets.
import { randomBytes } from 'node:crypto';
import { SecretCipher, UnavailableError } from '@ql/domain';
import { SqlActivationRepository, SqlSecretRepository } from '@ql/persistence';
import { AUDIT, DispatchFixture, DispatchTarget } from './dispatch.contract';

const KEY = randomBytes(32);
const ONE = 'pt_key=AAAA-cookie-one;pt_pin=jd_1;';
const TWO = 'pt_key=BBBB-cookie-two;pt_pin=jd_2;';
/** No stored byte may hold a value, or a value's first ten characters. */
const LEAK = /cookie-one|cookie-two|AAAA|BBBB|pt_key=A|pt_key=B/;

export function describeLogRedactionContract(dialect: string, makeTarget: () => DispatchTarget): void {
  describe(`redaction of stored output across chunks (${dialect})`, () => {
    let target: DispatchTarget;
    let f: DispatchFixture;
    let secrets: SqlSecretRepository;
    let acts: SqlActivationRepository;
    /** The same store on its own connection: another replica. */
    let other: SqlActivationRepository;
    const cipher = new SecretCipher('k', KEY);
    let n = 0;
    const name = (stem: string) => `${stem}-${++n}`;

    beforeAll(async () => {
      target = makeTarget();
      f = new DispatchFixture(await target.open());
      secrets = new SqlSecretRepository(f.db, f.ids, cipher);
      acts = new SqlActivationRepository(f.db, { redaction: secrets.redaction });
      const second = await target.openSecond();
      other = new SqlActivationRepository(second, {
        redaction: new SqlSecretRepository(second, f.ids, cipher).redaction,
      });
    });
    afterAll(async () => {
      await target.dispose();
    });

    /** A running attempt of a task that maps JD_COOKIE to two secrets joined by `&`. */
    async function running() {
      const one = name('c1');
      const two = name('c2');
      for (const [secret, value] of [
        [one, ONE],
        [two, TWO],
      ] as const)
        await secrets.put(secret, value, { actor: 'k', action: 'secret.put', target: `secret:${secret}` });
      const c = await f.claimedRun(name(`holder-${dialect}`), { secretEnv: { JD_COOKIE: `${one}&${two}` } });
      await acts.starting(c.fence);
      await acts.running({ ...c.fence, executorHandle: 'local-process:9' });
      return c;
    }
    const texts = async (runId: string) =>
      (await acts.readLogs(runId, { after: 0, limit: 50 }))!.entries.map((e) => [e.stream, e.raw]);
    const stored = async (runId: string) =>
      JSON.stringify([
        await f.db.many('SELECT * FROM run_logs WHERE run_id = :id', { id: runId }),
        await f.db.many('SELECT * FROM attempts WHERE run_id = :id', { id: runId }),
      ]);

    it('a value split between two chunks, stored through two replicas, is *** and never stored; the held end comes with the completion', async () => {
      const c = await running();
      const chunk = (seq: number, text: string, stream: 'stdout' | 'stderr' = 'stdout') => ({
        ...c.fence,
        seq,
        stream,
        text,
      });
      await acts.appendLog(chunk(0, `a ${ONE.slice(0, 10)}`));
      expect(await stored(c.run.id)).not.toMatch(LEAK); // held back sealed, not stored
      // A replay is idempotent; another text under a stored seq is refused.
      expect(await other.appendLog(chunk(0, `a ${ONE.slice(0, 10)}`))).toMatchObject({ outcome: 'replayed' });
      await expect(acts.appendLog(chunk(0, `a ${ONE.slice(0, 11)}`))).rejects.toMatchObject({
        reason: 'log_chunk_mismatch',
      });
      await other.appendLog(chunk(1, `${ONE.slice(10)} b ${TWO.slice(0, 12)}`));
      await acts.appendLog(chunk(2, 'err', 'stderr'));
      expect(await other.appendLog(chunk(1, `${ONE.slice(10)} b ${TWO.slice(0, 12)}`))).toMatchObject({
        outcome: 'replayed',
      });
      expect(await stored(c.run.id)).not.toMatch(LEAK);
      await other.complete({
        ...c.fence,
        outcome: 'succeeded',
        exitCode: 0,
        errorSummary: null,
        finalLogs: [{ seq: 3, stream: 'stdout', text: `${TWO.slice(12)} end pt_k` }],
      });
      expect(await texts(c.run.id)).toEqual([
        ['stdout', 'a '],
        ['stdout', '*** b '],
        ['stderr', 'err'],
        ['stdout', '*** end '],
        ['stdout', 'pt_k'], // held as a value's possible start, stored as written once the output ended
      ]);
      expect(await stored(c.run.id)).not.toMatch(LEAK);
    });

    it('a completion without output or summary still stores what was held (on PostgreSQL too, off the one-statement step)', async () => {
      const c = await running();
      await acts.appendLog({ ...c.fence, seq: 0, stream: 'stderr', text: 'done pt_k' });
      expect(await texts(c.run.id)).toEqual([['stderr', 'done ']]);
      await acts.complete({ ...c.fence, outcome: 'succeeded', exitCode: 0, errorSummary: null });
      expect(await texts(c.run.id)).toEqual([
        ['stderr', 'done '],
        ['stderr', 'pt_k'],
      ]);
      const attempt = await f.db.one<{ log_held: string | null }>(
        'SELECT log_held FROM attempts WHERE id = :id',
        {
          id: c.offer.attempt.id,
        },
      );
      expect(attempt!.log_held).toBeNull();
    });

    it('an attempt ended by its deadline stores what was held hidden: it may be a value cut off', async () => {
      const c = await running();
      await acts.appendLog({ ...c.fence, seq: 0, stream: 'stdout', text: `x ${ONE.slice(0, 12)}` });
      target.clock.advance(24 * 3600_000); // past any task's deadline
      const swept = await acts.sweepDeadlines(100, 0);
      expect(swept.timedOut + swept.retried).toBeGreaterThanOrEqual(1);
      expect(await texts(c.run.id)).toEqual([
        ['stdout', 'x '],
        ['stdout', '***'],
      ]);
      expect(await stored(c.run.id)).not.toMatch(LEAK);
    });

    it('stores a completion’s error summary with the values as ***', async () => {
      const c = await running();
      await acts.complete({
        ...c.fence,
        outcome: 'failed',
        exitCode: 1,
        errorSummary: `bad cookie ${ONE} x`,
      });
      const row = await f.db.one<{ error_summary: string }>(
        'SELECT error_summary FROM attempts WHERE id = :id',
        {
          id: c.offer.attempt.id,
        },
      );
      expect(row!.error_summary).toBe('bad cookie *** x');
    });

    it('a run cancelled while starting gets no secrets: refused as cancel_requested, nothing served', async () => {
      const one = name('c');
      await secrets.put(one, ONE, { actor: 'k', action: 'secret.put', target: `secret:${one}` });
      const c = await f.claimedRun(name(`cancel-${dialect}`), { secretEnv: { JD_COOKIE: one } });
      await acts.starting(c.fence);
      await f.runs.requestCancel(c.run.id, AUDIT);
      const refused = await secrets.deliver(c.fence).then(
        () => null,
        (e: unknown) => e,
      );
      expect(refused).toBeInstanceOf(UnavailableError);
      expect(refused).toMatchObject({ reason: 'cancel_requested' });
      expect(JSON.stringify(refused)).not.toContain('cookie-one');
      // Its start failure ends it as cancelled.
      const ended = await acts.startFailure({ ...c.fence, errorCode: 'cancel_requested' });
      expect(ended.snapshot.runStatus).toBe('cancelled');
    });
  });
}
