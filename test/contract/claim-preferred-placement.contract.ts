import { CANDIDATE_PAGE, ClaimResult } from '@ql/domain';
import { SqlExecutor, SqliteDatabase, compileSqlite } from '@ql/persistence';
import { candidateSql, heldRuns } from '../../libs/persistence/src/claim-preference';
import { snapshotDatabase } from '../support/db-snapshot';
import { newSessionId, snapshot, validCapabilities } from '../support/fixtures';
import { DispatchFixture, DispatchSuite, PREFERENCE_HOLD, SESSION_LEASE, offered } from './dispatch.contract';

const DISPATCH_TABLES = ['workers', 'worker_sessions', 'runs', 'attempts', 'run_leases', 'run_events'];
const AUDIT = { actor: 'test', action: 'test', target: 'test' };

/**
 * A claim of the queue head whose placement needs no look at other workers (warm caches). Unchanged
 * by R-PLC-2. SQLite: BEGIN, reserve the slot, head, attempt, lease, run CAS, events, COMMIT.
 * PostgreSQL: one call of ql_claim (ADR 0016).
 */
const HEAD_CLAIM_STATEMENTS = { sqlite: 8, postgres: 1 } as const;

type Worker = Awaited<ReturnType<DispatchFixture['worker']>>;

/** R-PLC-2 in the claim, part of the dispatch contract: preferred weights decide who gets a run first. */
export function describeClaimPreferredPlacement(suite: DispatchSuite): void {
  describe('preferred placement in the claim', () => {
    let n = 0;
    /** A label no worker of another test has, so only this test's workers can score on it. */
    const freshLabel = () => ({ key: 'pool', value: `fast-${suite.f.db.dialect}-${++n}` });

    /** Two workers equal but for the label the task prefers, and the task. */
    async function setup(weight = 10, preferredSlots = 4) {
      const { f } = suite;
      const label = freshLabel();
      const plain = await f.worker(suite.workerId('plain'), 4);
      const preferred = await f.worker(suite.workerId('preferred'), preferredSlots, {
        labels: { ...validCapabilities().labels, [label.key]: label.value },
      });
      const task = await f.task({ placement: { preferred: [{ ...label, weight }] } });
      return { plain, preferred, task, label };
    }

    async function statementsOf(call: () => Promise<ClaimResult>): Promise<[number, ClaimResult]> {
      const before = suite.f.db.statements.value;
      const result = await call();
      return [suite.f.db.statements.value - before, result];
    }

    it('a preferred worker wins over an equal non-preferred one that pulls first; the held pull writes nothing', async () => {
      const { f } = suite;
      const { plain, preferred, task } = await setup();
      const [run] = await f.queue(task.id, 1);
      const before = await snapshotDatabase(f.db, DISPATCH_TABLES);
      expect(await f.pull(plain)).toMatchObject({
        kind: 'idle',
        reason: 'preferred_elsewhere',
        activeLeases: 0,
        scanned: 1,
      });
      expect(await snapshotDatabase(f.db, DISPATCH_TABLES)).toEqual(before);
      const offer = offered(await f.pull(preferred));
      expect(offer.run.id).toBe(run!.id);
      expect(offer.attempt.workerId).toBe(preferred.workerId);
    });

    it('the puller takes the next run it may take while the head is held; the preferred worker gets the head', async () => {
      const { f } = suite;
      const { plain, preferred, task } = await setup();
      const [held] = await f.queue(task.id, 1);
      const [next] = await f.queue((await f.task()).id, 1);
      expect(offered(await f.pull(plain)).run.id).toBe(next!.id);
      expect(offered(await f.pull(preferred)).run.id).toBe(held!.id);
    });

    it('the hold is bounded: a run whose preferred worker never pulls goes to another worker once it has passed', async () => {
      const { f, target } = suite;
      const { plain, task } = await setup();
      const [run] = await f.queue(task.id, 1);
      expect(await f.pull(plain)).toMatchObject({ kind: 'idle', reason: 'preferred_elsewhere' });
      target.clock.advance(PREFERENCE_HOLD - 1);
      expect(await f.pull(plain)).toMatchObject({ kind: 'idle', reason: 'preferred_elsewhere' });
      target.clock.advance(1);
      expect(offered(await f.pull(plain)).run.id).toBe(run!.id);
    });

    it('a hold of 0 turns holding off: the first worker to pull takes the run', async () => {
      const { f } = suite;
      const { plain, task } = await setup();
      const [run] = await f.queue(task.id, 1);
      expect(offered(await f.pull(plain, f.ids.uuidV7(), undefined, 0)).run.id).toBe(run!.id);
    });

    it('equal preferred scores hold nothing: slots and worker id only rank, the first to pull takes it', async () => {
      const { f } = suite;
      const label = freshLabel();
      const labels = { ...validCapabilities().labels, [label.key]: label.value };
      const roomy = await f.worker(suite.workerId('a-roomy'), 8, { labels });
      const first = await f.worker(suite.workerId('z-first'), 1, { labels });
      const task = await f.task({ placement: { preferred: [{ ...label, weight: 10 }] } });
      const [run] = await f.queue(task.id, 1);
      expect(roomy.workerId < first.workerId).toBe(true);
      expect(offered(await f.pull(first)).run.id).toBe(run!.id);
    });

    const unable: [string, (f: DispatchFixture, w: Worker) => Promise<unknown>][] = [
      ['draining', (f, w) => f.sessions.drain({ ...w, leaseMs: SESSION_LEASE })],
      ['disabled', (f, w) => f.sessions.setDisabled(w.workerId, true, AUDIT)],
      ['offline', (f, w) => f.sessions.offline({ ...w, leaseMs: SESSION_LEASE })],
      [
        'full (its only slot holds a lease)',
        async (f, w) => {
          await f.queue((await f.task()).id, 1);
          offered(await f.pull(w));
        },
      ],
      [
        'out of slots by heartbeat',
        (f, w) => f.sessions.heartbeat({ ...w, leaseMs: SESSION_LEASE, availableSlots: 0 }),
      ],
    ];
    it.each(unable)('a preferred worker that is %s holds nothing back', async (_name, disable) => {
      const { f } = suite;
      const { plain, preferred, task } = await setup(10, 1);
      await disable(f, preferred);
      const [run] = await f.queue(task.id, 1);
      expect(offered(await f.pull(plain)).run.id).toBe(run!.id);
    });

    it('a preferred worker whose session lease has expired holds nothing back', async () => {
      const { f, target } = suite;
      const label = freshLabel();
      const plain = await f.worker(suite.workerId('plain'), 4);
      await f.sessions.register({
        workerId: suite.workerId('expired'),
        sessionId: newSessionId(),
        snapshot: snapshot({ capabilities: validCapabilities({ labels: { [label.key]: label.value } }) }),
        leaseMs: 5_000,
      });
      target.clock.advance(5_000);
      const task = await f.task({ placement: { preferred: [{ ...label, weight: 10 }] } });
      const [run] = await f.queue(task.id, 1);
      expect(offered(await f.pull(plain)).run.id).toBe(run!.id);
    });

    it('a preferred worker that breaks a required rule holds nothing back', async () => {
      const { f } = suite;
      const label = freshLabel();
      const plain = await f.worker(suite.workerId('plain'), 4, { memoryMiB: 1024 });
      await f.worker(suite.workerId('small'), 4, { labels: { [label.key]: label.value }, memoryMiB: 256 });
      const task = await f.task({
        placement: { required: { minMemoryMiB: 512 }, preferred: [{ ...label, weight: 10 }] },
      });
      const [run] = await f.queue(task.id, 1);
      expect(offered(await f.pull(plain)).run.id).toBe(run!.id);
    });

    it('weights add up: a worker holds a run for a higher score, never for a lower one', async () => {
      const { f } = suite;
      const [gpu, ssd] = [freshLabel().value, freshLabel().value];
      // gpu (7) and ssd (5) together outscore ssd alone; the best-scored worker holds nothing.
      const both = await f.worker(suite.workerId('both'), 4, { labels: { gpu, ssd } });
      const onlySsd = await f.worker(suite.workerId('ssd'), 4, { labels: { ssd } });
      const task = await f.task({
        placement: {
          preferred: [
            { key: 'gpu', value: gpu, weight: 7 },
            { key: 'ssd', value: ssd, weight: 5 },
          ],
        },
      });
      const [first, second] = await f.queue(task.id, 2);
      expect(await f.pull(onlySsd)).toMatchObject({ kind: 'idle', reason: 'preferred_elsewhere' });
      expect(offered(await f.pull(both)).run.id).toBe(first!.id);
      expect(offered(await f.pull(both)).run.id).toBe(second!.id);
    });

    it('label values are matched as text, whatever characters they hold (LIKE wildcards, quotes, escapes)', async () => {
      const { f } = suite;
      const value = `50%_off!"\\-${++n}`;
      const plain = await f.worker(suite.workerId('plain'), 4);
      const preferred = await f.worker(suite.workerId('deal'), 4, { labels: { deal: value } });
      const task = await f.task({ placement: { preferred: [{ key: 'deal', value, weight: 3 }] } });
      const [run] = await f.queue(task.id, 1);
      expect(await f.pull(plain)).toMatchObject({ kind: 'idle', reason: 'preferred_elsewhere' });
      expect(offered(await f.pull(preferred)).run.id).toBe(run!.id);
    });

    it('the page of candidate workers holds only ones that could take the run: 64 unable ones hide no able one', async () => {
      const { f } = suite;
      const label = freshLabel();
      const capabilities = validCapabilities({ labels: { [label.key]: label.value } });
      const plain = await f.worker(suite.workerId('plain'), 4);
      // Their ids sort before the able worker's, so a page of the first 64 by id would hold only them.
      const sidelined: ((w: Worker) => Promise<unknown>)[] = [
        (w) => f.sessions.drain({ ...w, leaseMs: SESSION_LEASE }),
        (w) => f.sessions.offline({ ...w, leaseMs: SESSION_LEASE }),
        (w) => f.sessions.setDisabled(w.workerId, true, AUDIT),
        (w) => f.sessions.heartbeat({ ...w, leaseMs: SESSION_LEASE, availableSlots: 0 }),
      ];
      for (let i = 0; i < CANDIDATE_PAGE; i++) {
        const w = await f.worker(suite.workerId('a-unable'), 2, capabilities);
        await sidelined[i % sidelined.length]!(w);
      }
      const able = await f.worker(suite.workerId('z-able'), 1, capabilities);
      const task = await f.task({ placement: { preferred: [{ ...label, weight: 10 }] } });
      const [run] = await f.queue(task.id, 1);
      expect(await f.pull(plain)).toMatchObject({ kind: 'idle', reason: 'preferred_elsewhere' });
      expect(offered(await f.pull(able)).run.id).toBe(run!.id);
    });

    it('cost: a run without preferred rules, or whose preference is settled, pays no extra statement', async () => {
      const { f, target } = suite;
      const { plain, preferred, task } = await setup();
      const plainTask = await f.task();
      await f.queue(plainTask.id, 1);
      offered(await f.pull(plain)); // warms the capabilities and revision caches
      await f.queue(task.id, 1);
      offered(await f.pull(preferred));
      // …and, on PostgreSQL, what this replica knows of the preferring task's placement for `plain`.
      await f.queue(task.id, 1);
      target.clock.advance(PREFERENCE_HOLD);
      offered(await f.pull(plain));
      const cases: [string, () => Promise<unknown>, Worker][] = [
        ['no preferred rules', () => f.queue(plainTask.id, 1), plain],
        ['the puller has every preferred label', () => f.queue(task.id, 1), preferred],
        [
          'the hold has passed',
          async () => {
            await f.queue(task.id, 1);
            target.clock.advance(PREFERENCE_HOLD);
          },
          plain,
        ],
      ];
      for (const [name, queue, worker] of cases) {
        await queue();
        const [cost, result] = await statementsOf(() => f.pull(worker));
        expect({ name, kind: result.kind, cost }).toEqual({
          name,
          kind: 'offered',
          cost: HEAD_CLAIM_STATEMENTS[f.db.dialect],
        });
      }
    });

    /** Rows of `workers` this transaction has read so far (PostgreSQL's per-transaction counters). */
    async function workerRowsRead(tx: SqlExecutor): Promise<number> {
      const row = await tx.one<{ n: string }>(
        `SELECT seq_tup_read + COALESCE(idx_tup_fetch, 0) AS n FROM pg_stat_xact_user_tables WHERE relname = 'workers'`,
      );
      return Number(row!.n);
    }

    it('cost: the candidate read reaches only the workers that have a preferred label, however many lack it', async () => {
      const { f } = suite;
      const { plain, task } = await setup();
      for (let i = 0; i < 40; i++) await f.worker(suite.workerId('lacking'), 4);
      const puller = { workerId: plain.workerId, capabilities: snapshot().capabilities.capabilities };
      const now = suite.target.clock.now();
      const question = [{ id: 'run', spec: task.spec.placement, queuedAt: now }];
      if (f.db.dialect === 'sqlite') {
        // SQLite keeps no read counters: its plan must reach `workers` by worker id (from the labels' index).
        const params = { workerId: plain.workerId, no: 0, page: CANDIDATE_PAGE, k0: 'k', v0: 'v', now };
        const plan = (f.db as SqliteDatabase).native
          .prepare(`EXPLAIN QUERY PLAN ${compileSqlite(candidateSql(1)).text}`)
          .all(params) as { detail: string }[];
        const onWorkers = plan.map((p) => p.detail).filter((d) => / w\b/.test(d));
        expect(onWorkers).toEqual([expect.stringMatching(/^SEARCH w USING .*worker_id=\?/)]);
        expect(plan.map((p) => p.detail)).toContainEqual(expect.stringMatching(/worker_labels_match/));
      } else {
        // With statistics, as autovacuum keeps them: the planner then knows how rare the label is.
        await f.db.run('ANALYZE workers, worker_labels');
      }
      const { held, read } = await f.db.transaction(async (tx) => {
        // A table of a few pages is rightly read whole; at scale the planner leaves it (bench `curve`).
        if (f.db.dialect === 'postgres') await tx.run('SET LOCAL enable_seqscan = off');
        const before = f.db.dialect === 'postgres' ? await workerRowsRead(tx) : 0;
        const held = await heldRuns(tx, puller, question, now, PREFERENCE_HOLD);
        return { held, read: f.db.dialect === 'postgres' ? (await workerRowsRead(tx)) - before : 0 };
      });
      expect([...held]).toEqual(['run']); // the worker with the label holds it
      // A handful (the labelled worker's row, its capabilities document when unseen): not the 41 without it.
      expect(read).toBeLessThan(10);
    });

    it('cost: a held pull reads one bounded page of workers, however many are registered', async () => {
      const { f } = suite;
      const { plain, task, label } = await setup();
      const [empty, idle] = await statementsOf(() => f.pull(plain));
      expect(idle).toMatchObject({ reason: 'no_queued_runs' });
      await f.queue(task.id, 1);
      const held = () => statementsOf(() => f.pull(plain));
      await held(); // warms the capabilities cache
      const [few, first] = await held();
      for (let i = 0; i < 70; i++)
        await f.worker(suite.workerId('many'), 4, {
          labels: { ...validCapabilities().labels, [label.key]: label.value },
        });
      const [many, second] = await held();
      expect(first).toMatchObject({ reason: 'preferred_elsewhere' });
      expect(second).toMatchObject({ reason: 'preferred_elsewhere' });
      // The empty queue's statements, plus one read of candidate workers and the page past the held head.
      expect({ few, many }).toEqual({ few: empty + 2, many: empty + 2 });
    });
  });
}
