import type { MigrationInterface, QueryRunner } from 'typeorm';
import { SQLITE_TYPES, downActivationAndLogs, upActivationAndLogs } from '../activation-and-logs';

/** Activation, completion and logs (sqlite); the statements are shared, only the column types differ. */
export class ActivationAndLogs1764806400000 implements MigrationInterface {
  name = 'ActivationAndLogs1764806400000';

  async up(q: QueryRunner): Promise<void> {
    await upActivationAndLogs(q, SQLITE_TYPES);
  }

  async down(q: QueryRunner): Promise<void> {
    await downActivationAndLogs(q, SQLITE_TYPES);
  }
}
