import type { MigrationInterface, QueryRunner } from 'typeorm';
import { POSTGRES_TYPES } from '../activation-and-logs';
import { downBundles, upBundles } from '../bundles';

/** Script bundles and the digest tasks and revisions pin (postgres; the statements are shared, ADR 0051). */
export class Bundles1766030400000 implements MigrationInterface {
  name = 'Bundles1766030400000';

  async up(q: QueryRunner): Promise<void> {
    await upBundles(q, POSTGRES_TYPES, 'bytea');
  }

  async down(q: QueryRunner): Promise<void> {
    await downBundles(q);
  }
}
