import type { MigrationInterface, QueryRunner } from 'typeorm';
import { SQLITE_TYPES } from '../activation-and-logs';
import { downBundles, upBundles } from '../bundles';

/** Script bundles and the digest tasks and revisions pin (sqlite; the statements are shared, ADR 0051). */
export class Bundles1766030400000 implements MigrationInterface {
  name = 'Bundles1766030400000';

  async up(q: QueryRunner): Promise<void> {
    await upBundles(q, SQLITE_TYPES, 'BLOB');
  }

  async down(q: QueryRunner): Promise<void> {
    await downBundles(q);
  }
}
