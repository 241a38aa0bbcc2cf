import type { MigrationInterface, QueryRunner } from 'typeorm';
import { SQLITE_TYPES } from '../activation-and-logs';
import { downWorkerCertificates, upWorkerCertificates } from '../worker-certificates';

/** The certificates issued to workers (sqlite); the statements are shared (ADR 0045 §4). */
export class WorkerCertificates1765929600000 implements MigrationInterface {
  name = 'WorkerCertificates1765929600000';

  async up(q: QueryRunner): Promise<void> {
    await upWorkerCertificates(q, SQLITE_TYPES);
  }

  async down(q: QueryRunner): Promise<void> {
    await downWorkerCertificates(q);
  }
}
