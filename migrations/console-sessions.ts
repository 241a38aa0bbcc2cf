import type { QueryRunner } from 'typeorm';
import { DialectTypes } from './activation-and-logs';

/**
 * Console sessions (ADR 0052): a browser signs in with an API key once and holds a random session
 * token in an HttpOnly cookie; only the token's SHA-256 is stored. A session acts with its API key's
 * role and ends when it is idle too long, reaches its lifetime, is signed out or revoked, or its key is.
 */
export async function upConsoleSessions(q: QueryRunner, t: DialectTypes): Promise<void> {
  await q.query(`CREATE TABLE console_sessions (
      id ${t.uuid} PRIMARY KEY NOT NULL,
      digest ${t.text} NOT NULL UNIQUE,
      api_key_id ${t.uuid} NOT NULL,
      created_at ${t.time} NOT NULL,
      last_seen_at ${t.time} NOT NULL,
      idle_ms ${t.bigint} NOT NULL,
      expires_at ${t.time} NOT NULL,
      revoked_at ${t.time}
    )${t.strict}`);
  await q.query('CREATE INDEX console_sessions_by_key ON console_sessions (api_key_id)');
}

export async function downConsoleSessions(q: QueryRunner): Promise<void> {
  await q.query('DROP TABLE console_sessions');
}
