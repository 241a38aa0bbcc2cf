import { ClaimResult } from '@ql/domain';
import { SqlDatabase, SqlParams, SqlTransaction } from '@ql/persistence';
import { DispatchFixture, DispatchSuite, offered } from './dispatch.contract';

/**
 * The claim's unlocked keyset page after the head; on PostgreSQL its pick is the very next statement.
 * Should the SQL change so this stops matching, the race test's order check fails, not passes.
 */
const LATER_PAGE = /queue_order > :q/;

/**
 * `inner`, except that the first later-page read of a claim hands its rows back only once `between()`
 * has settled: another connection acts between that read and the pick every time, not by luck.
 */
function pausedAfterLaterPage(inner: SqlDatabase, between: () => Promise<void>): SqlDatabase {
  let armed = true;
  const paused = (tx: SqlTransaction): SqlTransaction => ({
    one: <T>(sql: string, params?: SqlParams) => tx.one<T>(sql, params),
    run: (sql, params) => tx.run(sql, params),
    lock: (key) => tx.lock(key),
    many: async <T>(sql: string, params?: SqlParams) => {
      const rows = await tx.many<T>(sql, params);
      if (armed && LATER_PAGE.test(sql)) {
        armed = false;
        await between();
      }
      return rows;
    },
  });
  return {
    dialect: inner.dialect,
    statements: inner.statements,
    one: <T>(sql: string, params?: SqlParams) => inner.one<T>(sql, params),
    many: <T>(sql: string, params?: SqlParams) => inner.many<T>(sql, params),
    run: (sql, params) => inner.run(sql, params),
    transaction: (fn) => inner.transaction((tx) => fn(paused(tx))),
    ping: () => inner.ping(),
    migrationsApplied: () => inner.migrationsApplied(),
    close: () => inner.close(),
  };
}

/** R-LSE-2, part of the dispatch contract: a claim race past the queue head. */
export function describeClaimRaceAndFences(suite: DispatchSuite): void {
  describe('claim race past the head and lease fences', () => {
    it.each([
      { left: 'another candidate is left: the slower puller takes it', candidates: 2 },
      { left: 'no candidate is left: the slower puller answers idle', candidates: 1 },
    ])('a rival claims a candidate between the page read and the pick; $left', async ({ candidates }) => {
      const { f, target } = suite;
      // The heads need arm64, so an x64 puller passes over them to a later page.
      const arm = await f.task({ placement: { required: { architectures: ['arm64'] } } });
      const heads = await f.queue(arm.id, 2, 5);
      const queued = await f.queue((await f.task()).id, candidates);
      const puller = await f.worker(suite.workerId('puller'));
      const rival = await f.worker(suite.workerId('rival'));
      const second = new DispatchFixture(await target.openSecond(), f.ids);
      const order: string[] = [];
      let rivalResult: Promise<ClaimResult> | undefined;
      const paused = pausedAfterLaterPage(f.db, async () => {
        rivalResult = second.pull(rival).finally(() => order.push('rival'));
        // PostgreSQL: the rival's claim commits inside the window. SQLite has one writer, so the
        // rival waits for the puller's commit instead.
        if (f.db.dialect === 'postgres') await rivalResult;
      });
      try {
        const results: Record<string, ClaimResult> = {
          puller: await new DispatchFixture(paused, f.ids).pull(puller),
        };
        order.push('puller');
        results.rival = (await rivalResult)!;
        expect(order).toEqual(f.db.dialect === 'postgres' ? ['rival', 'puller'] : ['puller', 'rival']);
        // Whoever commits first takes the first candidate; the other the next one, or nothing.
        const [winner, loser] = order.map((name) => results[name]!);
        expect(offered(winner!).run.id).toBe(queued[0]!.id);
        if (candidates === 2) expect(offered(loser!).run.id).toBe(queued[1]!.id);
        else expect(loser).toMatchObject({ kind: 'idle' });
        const twice = await f.db.many(
          `SELECT run_id FROM run_leases WHERE state = 'active' GROUP BY run_id HAVING count(*) > 1`,
        );
        expect(twice).toEqual([]);
        expect(await f.count('attempts')).toBe(candidates);
        expect(await f.count('run_leases', `lease_generation = 1`)).toBe(candidates);
        for (const head of heads) expect(await f.runs.find(head.id)).toMatchObject({ status: 'queued' });
      } finally {
        await second.db.close();
      }
    });
  });
}
