import type { MigrationInterface, QueryRunner } from 'typeorm';
import { POSTGRES_ADMIN, downAdminViews, upAdminViews } from '../admin-views';

/** Attempt sessions, worker labels and the admin list indexes (postgres); the statements are shared. */
export class AdminViews1764979200000 implements MigrationInterface {
  name = 'AdminViews1764979200000';

  async up(q: QueryRunner): Promise<void> {
    await upAdminViews(q, POSTGRES_ADMIN);
  }

  async down(q: QueryRunner): Promise<void> {
    await downAdminViews(q);
  }
}
