import { ClaimResult } from '@ql/domain';
import { DispatchSuite, RUN_LEASE, newToken, offered } from './dispatch.contract';

/**
 * Statements (each one round trip) a claim costs, per dialect, as the tests' counter sees them. SQLite:
 * the transaction path (BEGIN … COMMIT). PostgreSQL: calls of ql_claim (ADR 0016), one in the steady
 * state; a session's first claim learns its capabilities digest and a placement new to the replica is
 * evaluated once, each with one more call; a head the puller does not match goes to the transaction
 * path after the call that says so.
 */
const COST = {
  'empty queue (idle)': { sqlite: 4, postgres: 1 },
  'first claim: new capabilities, placement and revision': { sqlite: 10, postgres: 4 },
  'the queue head (steady state)': { sqlite: 8, postgres: 1 },
  'another session with the same capabilities: its first claim': { sqlite: 8, postgres: 2 },
  'a new task whose placement is new to this replica': { sqlite: 9, postgres: 3 },
  'the same placement again': { sqlite: 8, postgres: 1 },
  'a released run (same attempt, next lease generation)': { sqlite: 8, postgres: 1 },
  'inside an open hold, nobody better: first seen': { sqlite: 10, postgres: 5 },
  'inside an open hold, nobody better: again': { sqlite: 9, postgres: 3 },
  'a head the puller does not match, first seen': { sqlite: 5, postgres: 7 },
  'the same head again': { sqlite: 5, postgres: 6 },
} as const;
type CostCase = keyof typeof COST;

/**
 * SQLite (ADR 0025): rows the claim's statements hand back. The reservation and the queue page are
 * read; the lease insert and the run's move read nothing back (before: 4 rows for a head claim, the
 * lease's times and the run's event sequence returned by their writes).
 */
const SQLITE_ROWS: Record<CostCase, number> = {
  'empty queue (idle)': 1,
  'first claim: new capabilities, placement and revision': 4,
  'the queue head (steady state)': 2,
  'another session with the same capabilities: its first claim': 2,
  'a new task whose placement is new to this replica': 3,
  'the same placement again': 2,
  'a released run (same attempt, next lease generation)': 3,
  'inside an open hold, nobody better: first seen': 3,
  'inside an open hold, nobody better: again': 2,
  'a head the puller does not match, first seen': 2,
  'the same head again': 2,
};

/** ADR 0016, part of the dispatch contract: what a claim costs in statements on each dialect. */
export function describeClaimCost(suite: DispatchSuite): void {
  describe('claim cost', () => {
    it('one statement per claim on PostgreSQL in the steady state; the transaction path on SQLite', async () => {
      const { f } = suite;
      const dialect = f.db.dialect;
      const measured: Partial<Record<CostCase, number>> = {};
      const rows: Partial<Record<CostCase, number>> = {};
      const cost = async (name: CostCase, call: () => Promise<ClaimResult>) => {
        const [before, rowsBefore] = [f.db.statements.value, f.db.statements.rows];
        const result = await call();
        measured[name] = f.db.statements.value - before;
        rows[name] = f.db.statements.rows - rowsBefore;
        return result;
      };
      // A capabilities document of its own, so every placement below is new to this replica for it.
      const zone = `cost-${dialect}-${Date.now()}`;
      const worker = await f.worker(suite.workerId('cost'), 8, { labels: { zone } });
      const plain = await f.task();
      await f.queue(plain.id, 4);
      offered(await cost('first claim: new capabilities, placement and revision', () => f.pull(worker)));
      offered(await cost('the queue head (steady state)', () => f.pull(worker)));
      const twin = await f.worker(suite.workerId('cost'), 8, { labels: { zone } });
      offered(await cost('another session with the same capabilities: its first claim', () => f.pull(twin)));
      const zoned = await f.task({ placement: { required: { labels: { zone } } } });
      await f.db.run('DELETE FROM runs WHERE status = :s', { s: 'queued' });
      expect(await cost('empty queue (idle)', () => f.pull(worker))).toMatchObject({
        kind: 'idle',
        reason: 'no_queued_runs',
      });
      await f.queue(zoned.id, 2);
      offered(await cost('a new task whose placement is new to this replica', () => f.pull(worker)));
      const token = newToken();
      const again = offered(await cost('the same placement again', () => f.pull(worker, undefined, token)));
      await f.leases.release(f.leaseCommand(worker, again, token));
      const reclaimed = offered(
        await cost('a released run (same attempt, next lease generation)', () => f.pull(worker)),
      );
      expect(reclaimed.attempt).toMatchObject({ id: again.attempt.id, leaseGeneration: 2 });
      expect(reclaimed.lease.expiresAt - reclaimed.lease.claimedAt).toBe(RUN_LEASE);
      // Inside the hold of a label nobody has: the candidates are read, nobody outscores, the run is taken.
      const preferring = await f.task({
        placement: { preferred: [{ key: 'pool', value: zone, weight: 10 }] },
      });
      await f.queue(preferring.id, 2);
      offered(await cost('inside an open hold, nobody better: first seen', () => f.pull(worker)));
      offered(await cost('inside an open hold, nobody better: again', () => f.pull(worker)));
      const other = await f.task({ placement: { required: { architectures: ['arm64'] } } });
      await f.queue(other.id, 1);
      for (const name of ['a head the puller does not match, first seen', 'the same head again'] as const)
        expect(await cost(name, () => f.pull(worker))).toMatchObject({
          kind: 'idle',
          reason: 'no_matching_run',
          scanned: 1,
        });
      const expected = Object.fromEntries(Object.entries(COST).map(([name, c]) => [name, c[dialect]]));
      expect(measured).toEqual(expected);
      if (dialect === 'sqlite') expect(rows).toEqual(SQLITE_ROWS);
    });
  });
}
