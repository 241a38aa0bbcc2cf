import type { MigrationInterface, QueryRunner } from 'typeorm';
import { POSTGRES_TYPES } from '../activation-and-logs';
import { downSecrets, upSecrets } from '../secrets';

/** Secrets, encrypted at rest, and which tasks map them (postgres); the statements are shared (ADR 0050). */
export class Secrets1766023200000 implements MigrationInterface {
  name = 'Secrets1766023200000';

  async up(q: QueryRunner): Promise<void> {
    await upSecrets(q, POSTGRES_TYPES);
  }

  async down(q: QueryRunner): Promise<void> {
    await downSecrets(q);
  }
}
