import { setTimeout as delay } from 'node:timers/promises';
import { ClaimResult } from '@ql/domain';
import { SqlDatabase } from '@ql/persistence';
import { snapshotDatabase } from '../support/db-snapshot';
import { DispatchFixture, DispatchSuite, expectFence } from './dispatch.contract';

const CLAIM_TABLES = ['runs', 'attempts', 'run_leases', 'run_events'];

/**
 * The window ql_claim opens (ADR 0016, PostgreSQL): it reads the fence and the capacity without a lock,
 * locks the head, and only then reserves the slot with the compare-and-set under the worker's row lock.
 * These tests put another transaction in that window every time: it holds the worker row while two
 * pulls of the same worker have passed the read and wait at the reservation, then changes the row or
 * not, and commits. The two pulls come through two replicas (two repositories on the same
 * database): one replica sends its queued claims in one statement (ADR 0027), so two statements of
 * the same worker at once are two replicas' doing.
 */
export function describeClaimOneStatementWindows(suite: DispatchSuite): void {
  describe('one-statement claim: the window between the unlocked read and the reservation', () => {
    /** A second replica's repositories on the same database. */
    const replica = () => new DispatchFixture(suite.f.db, suite.f.ids);

    /** Runs `pulls` while `second` holds the worker's row; `change` runs under that lock once both wait. */
    async function whileRowHeld(
      workerId: string,
      pulls: () => Promise<ClaimResult>[],
      change: (tx: Pick<SqlDatabase, 'run'>) => Promise<unknown>,
    ): Promise<PromiseSettledResult<ClaimResult>[]> {
      const { f, target } = suite;
      const second = await target.openSecond();
      try {
        let locked!: () => void;
        let release!: () => void;
        const isLocked = new Promise<void>((resolve) => (locked = resolve));
        const gate = new Promise<void>((resolve) => (release = resolve));
        const holder = second.transaction(async (tx) => {
          await tx.one('SELECT worker_id FROM workers WHERE worker_id = :workerId FOR UPDATE', { workerId });
          locked();
          await gate;
          await change(tx);
        });
        await isLocked;
        const running = pulls();
        await waitersOnLocks(f.db, running.length);
        release();
        await holder;
        return await Promise.allSettled(running);
      } finally {
        await second.close();
      }
    }

    it('two pulls of a worker with one free slot, both past the read: one offer, the other at capacity', async () => {
      const { f } = suite;
      const worker = await f.worker(suite.workerId('window'), 1);
      await f.queue((await f.task()).id, 2);
      const results = await whileRowHeld(
        worker.workerId,
        () => [f.pull(worker), replica().pull(worker)],
        async () => undefined,
      );
      const answers = results.map((r) => (r.status === 'fulfilled' ? r.value : r.reason)) as ClaimResult[];
      expect(answers.map((a) => (a.kind === 'offered' ? 'offered' : a.reason)).sort()).toEqual([
        'no_capacity',
        'offered',
      ]);
      expect(await f.count('run_leases', `state = 'active'`)).toBe(1);
      expect(await f.count('runs', `status = 'queued'`)).toBe(1);
    });

    it('a fence that moves while two pulls wait at the reservation refuses both, and nothing is claimed', async () => {
      const { f } = suite;
      const worker = await f.worker(suite.workerId('window'), 4);
      await f.queue((await f.task()).id, 2);
      const before = await snapshotDatabase(f.db, CLAIM_TABLES);
      const results = await whileRowHeld(
        worker.workerId,
        () => [f.pull(worker), replica().pull(worker)],
        (tx) =>
          tx.run('UPDATE workers SET version = version + 1 WHERE worker_id = :w', { w: worker.workerId }),
      );
      for (const r of results)
        await expectFence(
          r.status === 'fulfilled' ? Promise.resolve(r.value) : Promise.reject(r.reason),
          'session',
          'version_mismatch',
        );
      expect(await snapshotDatabase(f.db, CLAIM_TABLES)).toEqual(before);
    });
  });
}

/** Until `n` backends of this database wait for a lock (the pulls at the reservation). */
async function waitersOnLocks(db: SqlDatabase, n: number): Promise<void> {
  for (;;) {
    const row = await db.one<{ n: string }>(
      `SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`,
    );
    if (Number(row!.n) >= n) return;
    await delay(5);
  }
}
