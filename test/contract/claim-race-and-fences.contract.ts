import { ClaimResult, LeaseCommand } from '@ql/domain';
import { SqlDatabase, SqlParams, SqlTransaction } from '@ql/persistence';
import { snapshotDatabase } from '../support/db-snapshot';
import { overriding } from '../support/paused-database';
import { newSessionId, snapshot } from '../support/fixtures';
import {
  DispatchFixture,
  DispatchSuite,
  AUDIT,
  SESSION_LEASE,
  expectFence,
  newToken,
  offered,
} from './dispatch.contract';

/** What a refused lease call must leave exactly as it was. */
const DISPATCH_TABLES = ['workers', 'worker_sessions', 'runs', 'attempts', 'run_leases', 'run_events'];

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
  return overriding(inner, { transaction: (fn) => inner.transaction((tx) => fn(paused(tx))) });
}

/**
 * `inner`, except that the first claim that misses its reservation (PostgreSQL: `ql_claim` answers
 * `explain`; the transaction path: its transaction rejects with `NotClaimed`) waits for `between()`
 * before the repository reads why: another write lands between the miss and its explanation.
 */
function pausedAfterClaimMiss(inner: SqlDatabase, between: () => Promise<void>): SqlDatabase {
  let armed = true;
  const pause = async () => {
    if (!armed) return;
    armed = false;
    await between();
  };
  return overriding(inner, {
    one: async <T>(sql: string, params?: SqlParams) => {
      const row = await inner.one<T>(sql, params);
      if (/ql_claim\(/.test(sql) && (row as { kind?: string } | undefined)?.kind === 'explain') await pause();
      return row;
    },
    transaction: async (fn) => {
      try {
        return await inner.transaction(fn);
      } catch (error) {
        if ((error as Error).constructor.name === 'NotClaimed') await pause();
        throw error;
      }
    },
  });
}

type Worker = Awaited<ReturnType<DispatchFixture['worker']>>;

/** The three lease fences the random model reaches only by luck (R-LSE-4, R-LSE-5, R-REG-5). */
const FENCES = [
  {
    name: 'release with a wrong token',
    call: (f: DispatchFixture, command: LeaseCommand) => f.leases.release(command),
    wrongToken: true,
    replaced: false,
    area: 'lease',
    reason: 'lease_token_mismatch',
  },
  {
    name: 'renew from a replaced session',
    call: (f: DispatchFixture, command: LeaseCommand) => f.leases.renew(command),
    wrongToken: false,
    replaced: true,
    area: 'session',
    reason: 'session_replaced',
  },
  {
    name: 'release from a replaced session',
    call: (f: DispatchFixture, command: LeaseCommand) => f.leases.release(command),
    wrongToken: false,
    replaced: true,
    area: 'session',
    reason: 'session_replaced',
  },
] as const;

/** R-LSE-2..5, part of the dispatch contract: a claim race past the queue head; fences pinned as examples. */
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

    it('an admin resume between a claim miss and its explanation: the claim is made again, not fenced', async () => {
      const { f } = suite;
      const [run] = await f.queue((await f.task()).id, 1);
      const worker = await f.worker(suite.workerId('resumed'));
      await f.sessions.drainWorker(worker.workerId, AUDIT);
      // The drain keeps the session version, so the pull's fence still holds after the resume.
      const paused = pausedAfterClaimMiss(f.db, async () => {
        await f.sessions.resumeWorker(worker.workerId, AUDIT);
      });
      const result = await new DispatchFixture(paused, f.ids).pull(worker);
      expect(offered(result).run.id).toBe(run!.id);
      expect(await f.count('run_leases', `worker_id = '${worker.workerId}' AND state = 'active'`)).toBe(1);
    });

    /** Registers a new session for the worker: the old one is fenced for ever. */
    async function replace(worker: Worker): Promise<void> {
      const replacement = await suite.f.sessions.register({
        workerId: worker.workerId,
        sessionId: newSessionId(),
        snapshot: snapshot(),
        leaseMs: SESSION_LEASE,
      });
      expect(replacement.outcome).toBe('replaced');
    }

    it.each(FENCES)(
      '$name is refused ($area $reason) and changes nothing',
      async ({ call, wrongToken, replaced, area, reason }) => {
        const { f } = suite;
        await f.queue((await f.task()).id, 1);
        const worker = await f.worker(suite.workerId());
        const token = newToken();
        const offer = offered(await f.pull(worker, f.ids.uuidV7(), token));
        if (replaced) await replace(worker);
        const before = await snapshotDatabase(f.db, DISPATCH_TABLES);
        const command = f.leaseCommand(worker, offer, wrongToken ? newToken() : token);
        await expectFence(call(f, command), area, reason);
        expect(await snapshotDatabase(f.db, DISPATCH_TABLES)).toEqual(before);
      },
    );
  });
}
