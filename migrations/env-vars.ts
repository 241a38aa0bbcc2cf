import type { MigrationInterface, QueryRunner } from 'typeorm';
import { DialectTypes, POSTGRES_TYPES, SQLITE_TYPES } from './activation-and-logs';

/**
 * Issue 31 item 2 (ADR 0061): global environment variables. A secret one's value is the secret
 * `env.<name>` (ADR 0050), so `value` is null for it; a plain one's value is here. `version` grows
 * when the value changes; `position` orders the page and the delivery (ties by name). A run records
 * the variables it was pinned with (`run_env_vars`); a plain one's value is kept per version.
 */
function envVars(t: DialectTypes): new () => MigrationInterface {
  return class EnvVars1767312000000 implements MigrationInterface {
    name = 'EnvVars1767312000000';

    async up(q: QueryRunner): Promise<void> {
      await q.query(`CREATE TABLE env_vars (
          id ${t.uuid} PRIMARY KEY NOT NULL,
          name ${t.text} NOT NULL UNIQUE,
          secret ${t.flag},
          value ${t.text},
          remark ${t.text} NOT NULL,
          enabled ${t.flag},
          position ${t.bigint} NOT NULL,
          version ${t.bigint} NOT NULL,
          created_at ${t.time} NOT NULL,
          updated_at ${t.time} NOT NULL,
          CHECK ((secret AND value IS NULL) OR (NOT secret AND value IS NOT NULL))
        )${t.strict}`);
      await q.query('CREATE INDEX env_vars_by_position ON env_vars (position, name)');
      // A plain variable's value by version: what a run pinned to it is offered, again on a replay.
      await q.query(`CREATE TABLE env_var_versions (
          env_var_id ${t.uuid} NOT NULL,
          version ${t.bigint} NOT NULL,
          value ${t.text} NOT NULL,
          PRIMARY KEY (env_var_id, version)
        )${t.strict}`);
      // What each run received, in order: names and versions, never values.
      await q.query(`CREATE TABLE run_env_vars (
          run_id ${t.uuid} NOT NULL,
          position ${t.int} NOT NULL,
          env_var_id ${t.uuid} NOT NULL,
          name ${t.text} NOT NULL,
          version ${t.bigint} NOT NULL,
          secret ${t.flag},
          PRIMARY KEY (run_id, position)
        )${t.strict}`);
    }

    async down(q: QueryRunner): Promise<void> {
      await q.query('DROP TABLE run_env_vars');
      await q.query('DROP TABLE env_var_versions');
      await q.query('DROP TABLE env_vars');
    }
  };
}

export const SqliteEnvVars1767312000000 = envVars(SQLITE_TYPES);
export const PostgresEnvVars1767312000000 = envVars(POSTGRES_TYPES);
