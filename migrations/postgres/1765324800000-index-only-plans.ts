import type { MigrationInterface, QueryRunner } from 'typeorm';
import { CLAIM_FUNCTION_SIGNATURE } from './1765065600000-claim-function';

/**
 * Issue 10 item 4: a claim's cost must not grow with the lease history. `ql_claim` is PL/pgSQL: each
 * connection plans its statements once and keeps the plans until something invalidates them (an
 * ANALYZE of a table they read, for one). A connection whose first claims ran while the lease table
 * held no page (a fresh database, or a drained queue after VACUUM) planned a sequential scan for the
 * offer-id check, and kept it while the table grew: one row read per lease written, on every claim,
 * until autovacuum's next ANALYZE of `run_leases`. Every statement of the function has an index to
 * use (primary keys, the queue index), so scans are turned off inside it.
 */
export class IndexOnlyPlans1765324800000 implements MigrationInterface {
  name = 'IndexOnlyPlans1765324800000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER FUNCTION ${CLAIM_FUNCTION_SIGNATURE} SET enable_seqscan = off`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER FUNCTION ${CLAIM_FUNCTION_SIGNATURE} RESET enable_seqscan`);
  }
}
