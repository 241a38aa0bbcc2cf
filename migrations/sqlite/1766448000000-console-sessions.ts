import type { MigrationInterface, QueryRunner } from 'typeorm';
import { SQLITE_TYPES } from '../activation-and-logs';
import { downConsoleSessions, upConsoleSessions } from '../console-sessions';

/** Console sessions (sqlite); the statements are shared (ADR 0052). */
export class ConsoleSessions1766448000000 implements MigrationInterface {
  name = 'ConsoleSessions1766448000000';

  async up(q: QueryRunner): Promise<void> {
    await upConsoleSessions(q, SQLITE_TYPES);
  }

  async down(q: QueryRunner): Promise<void> {
    await downConsoleSessions(q);
  }
}
