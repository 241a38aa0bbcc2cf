import type { QueryRunner } from 'typeorm';
import { DialectTypes } from './activation-and-logs';

/**
 * Secrets (ADR 0050): each value AES-256-GCM encrypted under a key from configuration, stored as
 * base64 ciphertext (tag appended) with its 96-bit nonce and the id of its key; never plaintext.
 * `task_secret_uses` says which live tasks' current revisions map which secret names: it is what a
 * delete is refused by and what the admin list shows; task writes keep it in their transaction.
 */
export async function upSecrets(q: QueryRunner, t: DialectTypes): Promise<void> {
  await q.query(`CREATE TABLE secrets (
      name ${t.text} PRIMARY KEY NOT NULL,
      key_id ${t.text} NOT NULL,
      nonce ${t.text} NOT NULL,
      ciphertext ${t.text} NOT NULL,
      created_at ${t.time} NOT NULL,
      updated_at ${t.time} NOT NULL
    )${t.strict}`);
  await q.query(`CREATE TABLE task_secret_uses (
      task_id ${t.uuid} NOT NULL,
      secret_name ${t.text} NOT NULL,
      PRIMARY KEY (task_id, secret_name)
    )${t.strict}`);
  await q.query('CREATE INDEX task_secret_uses_by_secret ON task_secret_uses (secret_name, task_id)');
}

export async function downSecrets(q: QueryRunner): Promise<void> {
  await q.query('DROP TABLE task_secret_uses');
  await q.query('DROP TABLE secrets');
}
