import { SqlDatabase } from '@ql/persistence';
import { DispatchFixture, DispatchSuite, offered } from './dispatch.contract';

const TABLES = ['workers', 'runs', 'attempts', 'run_leases', 'run_events'];

/** Sequential scans per table so far, as this backend sees them after flushing its own counters. */
export async function seqScans(db: SqlDatabase): Promise<Record<string, number>> {
  await db.one('SELECT pg_stat_force_next_flush()');
  const rows = await db.many<{ relname: string; seq_scan: string | number }>(
    `SELECT relname, seq_scan FROM pg_stat_user_tables WHERE relname IN (${TABLES.map((t) => `'${t}'`).join(', ')})`,
  );
  return Object.fromEntries(rows.map((r) => [r.relname, Number(r.seq_scan)]));
}

/**
 * Issue 10 item 4 on PostgreSQL: a claim's cost must not grow with the lease history. `ql_claim` is a
 * PL/pgSQL function: each connection caches the plans of its statements, and a plan made while a
 * table was small (a fresh database, or a queue just drained) may scan it. Such a plan would stay with
 * the connection while the table grows, one row read per lease ever written, on every claim.
 */
export function describeClaimPlans(suite: DispatchSuite): void {
  describe('claim plans (PostgreSQL)', () => {
    it('claims planned while the tables were empty still read by index once they hold a history', async () => {
      const { f, target } = suite;
      // A fresh database, or one whose queue was drained and vacuumed: the lease, attempt and event
      // tables hold no page at all when a connection plans its first claims.
      await f.db.run('VACUUM run_leases, attempts, run_events');
      const db = await target.openSecond();
      try {
        const one = new DispatchFixture(db, f.ids);
        const task = await f.task();
        await f.queue(task.id, 40);
        const workers = [];
        for (let i = 0; i < 4; i++) workers.push(await one.worker(suite.workerId('plans'), 64));
        const [worker] = workers;
        for (let i = 0; i < 8; i++) offered(await one.pull(worker!));
        // A history: 3,000 ended leases of other attempts.
        await f.db.run(
          `INSERT INTO run_leases (attempt_id, lease_generation, offer_id, run_id, worker_id, session_id,
             session_generation, version, token_digest, state, expires_at, claimed_at, ended_at)
           SELECT gen_random_uuid(), 1, gen_random_uuid(), gen_random_uuid(), 'history', gen_random_uuid(),
             1, 1, md5(g::text), 'completed', now(), now(), now() FROM generate_series(1, 3000) g`,
        );
        const before = await seqScans(db);
        for (let i = 0; i < 4; i++) offered(await one.pull(worker!));
        // Claims that arrive together go in one statement (ADR 0027): its plan too.
        for (let i = 0; i < 3; i++) (await Promise.all(workers.map((w) => one.pull(w)))).forEach(offered);
        const after = await seqScans(db);
        const scans = Object.fromEntries(TABLES.map((t) => [t, (after[t] ?? 0) - (before[t] ?? 0)]));
        expect(scans).toEqual(Object.fromEntries(TABLES.map((t) => [t, 0])));
      } finally {
        await db.close();
      }
    });
  });
}
