import type { QueryRunner } from 'typeorm';

/** The column types that differ between the dialects; everything else of this migration is shared. */
export interface DialectTypes {
  readonly time: string;
  readonly int: string;
  readonly bigint: string;
  readonly text: string;
  readonly uuid: string;
  readonly flag: string;
  readonly strict: string;
}

export const SQLITE_TYPES: DialectTypes = {
  time: 'INTEGER',
  int: 'INTEGER',
  bigint: 'INTEGER',
  text: 'TEXT',
  uuid: 'TEXT',
  flag: 'INTEGER NOT NULL DEFAULT 0',
  strict: ' STRICT',
};
export const POSTGRES_TYPES: DialectTypes = {
  time: 'timestamptz',
  int: 'integer',
  bigint: 'bigint',
  text: 'text',
  uuid: 'uuid',
  flag: 'boolean NOT NULL DEFAULT false',
  strict: '',
};

const attemptColumns = (t: DialectTypes) => [
  ['deadline_at', t.time],
  ['started_at', t.time],
  ['executor_handle', t.text],
  ['error_code', t.text],
  ['exit_code', t.int],
  ['error_summary', t.text],
  ['callback_seq', `${t.int} NOT NULL DEFAULT 0`],
  ['ack_starting', t.text],
  ['ack_running', t.text],
  ['ack_final', t.text],
  ['log_next_seq', `${t.int} NOT NULL DEFAULT 0`],
];

/**
 * Activation, completion and logs: the attempt's deadline, executor handle, outcome and the digests
 * that recognise a replayed acknowledgement; the run's log counters; `run_logs`; the indexes of the
 * deadline sweep and of a session's cancel intents.
 */
export async function upActivationAndLogs(q: QueryRunner, t: DialectTypes): Promise<void> {
  for (const [name, type] of attemptColumns(t))
    await q.query(`ALTER TABLE attempts ADD COLUMN ${name} ${type}`);
  await q.query(
    `CREATE INDEX attempts_deadline ON attempts (deadline_at) WHERE status IN ('starting', 'running')`,
  );
  await q.query(`ALTER TABLE runs ADD COLUMN log_bytes ${t.bigint} NOT NULL DEFAULT 0`);
  await q.query(`ALTER TABLE runs ADD COLUMN log_truncated ${t.flag}`);
  await q.query(`CREATE TABLE run_logs (
      run_id ${t.uuid} NOT NULL,
      position ${t.bigint} NOT NULL,
      attempt_id ${t.uuid} NOT NULL,
      seq ${t.int},
      kind ${t.text} NOT NULL CHECK (kind IN ('output', 'truncated')),
      text ${t.text} NOT NULL,
      at ${t.time} NOT NULL,
      PRIMARY KEY (run_id, position)
    )${t.strict}`);
  await q.query(`CREATE UNIQUE INDEX run_logs_chunk ON run_logs (attempt_id, seq) WHERE seq IS NOT NULL`);
  await q.query(
    `CREATE INDEX run_leases_holder ON run_leases (worker_id, session_id) WHERE state = 'active'`,
  );
}

export async function downActivationAndLogs(q: QueryRunner, t: DialectTypes): Promise<void> {
  await q.query('DROP INDEX run_leases_holder');
  await q.query('DROP TABLE run_logs');
  await q.query('DROP INDEX attempts_deadline');
  for (const column of ['log_truncated', 'log_bytes'])
    await q.query(`ALTER TABLE runs DROP COLUMN ${column}`);
  for (const [name] of attemptColumns(t).reverse()) await q.query(`ALTER TABLE attempts DROP COLUMN ${name}`);
}
