import type { MigrationInterface, QueryRunner } from 'typeorm';
import { DialectTypes, POSTGRES_TYPES, SQLITE_TYPES } from './activation-and-logs';

/**
 * Issue 29 item 5 (ADR 0050, amended): each running control plane publishes the secret keys it holds
 * (ids and check values, never a key), so `npm run secret -- set|rotate` refuses to write what a
 * running plane could not open.
 */
function planeSecretKeys(t: DialectTypes): new () => MigrationInterface {
  return class PlaneSecretKeys1767225600000 implements MigrationInterface {
    name = 'PlaneSecretKeys1767225600000';

    async up(q: QueryRunner): Promise<void> {
      await q.query(`CREATE TABLE plane_secret_keys (
          replica_id ${t.text} PRIMARY KEY NOT NULL,
          info ${t.text} NOT NULL,
          seen_ms ${t.bigint} NOT NULL
        )${t.strict}`);
    }

    async down(q: QueryRunner): Promise<void> {
      await q.query('DROP TABLE plane_secret_keys');
    }
  };
}

export const SqlitePlaneSecretKeys1767225600000 = planeSecretKeys(SQLITE_TYPES);
export const PostgresPlaneSecretKeys1767225600000 = planeSecretKeys(POSTGRES_TYPES);
