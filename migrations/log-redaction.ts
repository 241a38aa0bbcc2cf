import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Issue 27 item 1 (ADR 0050): the control plane's redaction holds across the chunks of one stream.
 * `attempts.log_held` is what it still holds back per stream (sealed under the secrets key, so no
 * part of a value is stored in the clear), `run_logs.text_mac` a keyed digest of the chunk as it came,
 * against which a replay is compared. The statements are the same on both dialects.
 */
export class LogRedaction1766707200000 implements MigrationInterface {
  name = 'LogRedaction1766707200000';

  async up(q: QueryRunner): Promise<void> {
    await q.query('ALTER TABLE attempts ADD COLUMN log_held TEXT');
    await q.query('ALTER TABLE run_logs ADD COLUMN text_mac TEXT');
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('ALTER TABLE run_logs DROP COLUMN text_mac');
    await q.query('ALTER TABLE attempts DROP COLUMN log_held');
  }
}
