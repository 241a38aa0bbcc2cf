import type { MigrationInterface, QueryRunner } from 'typeorm';
import { POSTGRES_TYPES } from '../activation-and-logs';
import { downEnrollmentTokens, upEnrollmentTokens } from '../enrollment-tokens';

/** Enrollment tokens and the worker ids each enrolled (postgres); the statements are shared (ADR 0045 §1). */
export class EnrollmentTokens1765756800000 implements MigrationInterface {
  name = 'EnrollmentTokens1765756800000';

  async up(q: QueryRunner): Promise<void> {
    await upEnrollmentTokens(q, POSTGRES_TYPES);
  }

  async down(q: QueryRunner): Promise<void> {
    await downEnrollmentTokens(q);
  }
}
