import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Issue 20: the runs list filtered by worker (`GET /api/v1/runs?workerId=`, the console's worker page)
 * reads the run ids of a worker's attempts from this index, newest first, instead of scanning every
 * attempt. The statement is the same on both dialects, so one class serves both lists.
 */
export class AttemptsByWorker1766620800000 implements MigrationInterface {
  name = 'AttemptsByWorker1766620800000';

  async up(q: QueryRunner): Promise<void> {
    await q.query('CREATE INDEX attempts_worker ON attempts (worker_id, run_id)');
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP INDEX attempts_worker');
  }
}
