import type { MigrationInterface, QueryRunner } from 'typeorm';
import { downLogStreams, upLogStreams } from '../log-streams';

/** The stream of each stored chunk of output (postgres); the statement is shared (ADR 0032). */
export class LogStreams1765411200000 implements MigrationInterface {
  name = 'LogStreams1765411200000';

  async up(q: QueryRunner): Promise<void> {
    await upLogStreams(q);
  }

  async down(q: QueryRunner): Promise<void> {
    await downLogStreams(q);
  }
}
