import type { QueryRunner } from 'typeorm';
import { DialectTypes } from './activation-and-logs';

/**
 * Enrollment tokens (ADR 0045 §1): only a token's SHA-256 is stored; a token names one worker id or a
 * pattern with a count. Each worker id a token enrolled is one row of `enrollment_token_uses`: its
 * primary key makes the token single-use per worker id, and a pattern's count is the number of its
 * rows, counted under the token's row lock.
 */
export async function upEnrollmentTokens(q: QueryRunner, t: DialectTypes): Promise<void> {
  await q.query(`CREATE TABLE enrollment_tokens (
      id ${t.uuid} PRIMARY KEY NOT NULL,
      digest ${t.text} NOT NULL UNIQUE,
      worker_id ${t.text},
      pattern ${t.text},
      max_workers ${t.int} NOT NULL CHECK (max_workers BETWEEN 1 AND 1000),
      expires_at ${t.time} NOT NULL,
      revoked_at ${t.time},
      created_by ${t.text} NOT NULL,
      created_at ${t.time} NOT NULL,
      CHECK ((worker_id IS NULL) <> (pattern IS NULL)),
      CHECK (worker_id IS NULL OR max_workers = 1)
    )${t.strict}`);
  await q.query(`CREATE TABLE enrollment_token_uses (
      token_id ${t.uuid} NOT NULL,
      worker_id ${t.text} NOT NULL,
      at ${t.time} NOT NULL,
      PRIMARY KEY (token_id, worker_id)
    )${t.strict}`);
}

export async function downEnrollmentTokens(q: QueryRunner): Promise<void> {
  await q.query('DROP TABLE enrollment_token_uses');
  await q.query('DROP TABLE enrollment_tokens');
}
