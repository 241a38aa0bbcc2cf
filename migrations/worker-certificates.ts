import type { QueryRunner } from 'typeorm';
import { DialectTypes } from './activation-and-logs';

/**
 * Every certificate the control plane issued to a worker (ADR 0045 §4). A partial unique index keeps
 * at most one current certificate (neither superseded nor revoked) per worker; `renewed_from` finds
 * the answer to a renewal sent again.
 */
export async function upWorkerCertificates(q: QueryRunner, t: DialectTypes): Promise<void> {
  await q.query(`CREATE TABLE worker_certificates (
      fingerprint ${t.text} PRIMARY KEY NOT NULL,
      worker_id ${t.text} NOT NULL,
      serial ${t.text} NOT NULL UNIQUE,
      public_key_digest ${t.text} NOT NULL,
      certificate_pem ${t.text} NOT NULL,
      issued_at ${t.time} NOT NULL,
      not_after ${t.time} NOT NULL,
      renewed_from ${t.text},
      superseded_by ${t.text},
      revoked_at ${t.time}
    )${t.strict}`);
  await q.query(`CREATE UNIQUE INDEX worker_certificates_current ON worker_certificates (worker_id)
      WHERE superseded_by IS NULL AND revoked_at IS NULL`);
  await q.query('CREATE INDEX worker_certificates_worker ON worker_certificates (worker_id, issued_at)');
  await q.query(`CREATE INDEX worker_certificates_renewed_from ON worker_certificates (renewed_from)
      WHERE renewed_from IS NOT NULL`);
}

export async function downWorkerCertificates(q: QueryRunner): Promise<void> {
  await q.query('DROP TABLE worker_certificates');
}
