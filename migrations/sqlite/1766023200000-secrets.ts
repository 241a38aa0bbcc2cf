import type { MigrationInterface, QueryRunner } from 'typeorm';
import { SQLITE_TYPES } from '../activation-and-logs';
import { downSecrets, upSecrets } from '../secrets';

/** Secrets, encrypted at rest, and which tasks map them (sqlite); the statements are shared (ADR 0050). */
export class Secrets1766023200000 implements MigrationInterface {
  name = 'Secrets1766023200000';

  async up(q: QueryRunner): Promise<void> {
    await upSecrets(q, SQLITE_TYPES);
  }

  async down(q: QueryRunner): Promise<void> {
    await downSecrets(q);
  }
}
