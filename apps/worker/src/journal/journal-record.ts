import {
  LEASE_TOKEN_PATTERN,
  ValidationError,
  isUuidV7,
  readEnum,
  readInt,
  readObject,
  readString,
} from '@ql/domain';
import { JOURNAL_STATES, JournalState, PROCESS_STATES, isFinished } from './journal-states';

export const JOURNAL_RECORD_SCHEMA = 'qinglong/worker-journal-record@v1';
export const COMPLETION_STATUSES = ['succeeded', 'failed', 'timed_out', 'cancelled'] as const;
export type CompletionStatus = (typeof COMPLETION_STATUSES)[number];

/** The launched process: enough to find and verify its group after a worker crash. */
export interface RecordedProcess {
  readonly pid: number;
  readonly pgid: number;
  /** Boot the process was started in; null where the host has no `/proc`. */
  readonly bootId: string | null;
}

/**
 * The `executorHandle` the worker reports for a launched process (R-ACT-1): its process group. The
 * restart scan rebuilds it from the journal when it reports a completion in `running`'s stead (ADR 0047).
 */
export function executorHandleOf(process: RecordedProcess): string {
  return `local-process:${process.pgid}`;
}

export interface RecordedExit {
  readonly code: number | null;
  readonly signal: string | null;
}

/** What the worker reports (or reported) as the completion of the attempt (R-CMP-1). */
export interface RecordedOutcome {
  readonly status: CompletionStatus;
  readonly exitCode: number | null;
  readonly errorCode: string | null;
}

/** One accepted offer (one attempt under one lease generation), as one 0600 file. */
export interface JournalRecord {
  readonly schema: typeof JOURNAL_RECORD_SCHEMA;
  readonly offerId: string;
  readonly runId: string;
  readonly attemptId: string;
  readonly leaseGeneration: number;
  /** The worker's own lease token while the lease matters; null once the record is finished (ADR 0008). */
  readonly leaseToken: string | null;
  readonly specDigest: string;
  readonly state: JournalState;
  readonly createdAt: string;
  readonly updatedAt: string;
  readonly process: RecordedProcess | null;
  readonly exit: RecordedExit | null;
  readonly outcome: RecordedOutcome | null;
  readonly recoveryReason: string | null;
}

/** A record file that does not parse or breaks an invariant: never guessed at, the journal stops. */
export class JournalCorruptError extends Error {
  override readonly name = 'JournalCorruptError';
}

const INT31 = 2 ** 31 - 1;
const ISO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const DIGEST = /^[0-9a-f]{64}$/;
const CODE = /^[a-z][a-z0-9_]{0,63}$/;
const SIGNAL = /^SIG[A-Z0-9]{1,12}$/;
const FIELDS = [
  'schema',
  'offerId',
  'runId',
  'attemptId',
  'leaseGeneration',
  'leaseToken',
  'specDigest',
  'state',
  'createdAt',
  'updatedAt',
  'process',
  'exit',
  'outcome',
  'recoveryReason',
] as const;

function uuid(value: unknown, field: string): string {
  if (typeof value !== 'string' || !isUuidV7(value)) throw new ValidationError(field, 'invalid_uuid');
  return value;
}
const nullable = <T>(value: unknown, read: (v: unknown) => T): T | null =>
  value === null ? null : read(value);
const exitCode = (v: unknown, field: string) => readInt(v, field, -INT31, INT31);

function readProcess(value: unknown): RecordedProcess {
  const p = readObject(value, 'process', ['pid', 'pgid', 'bootId']);
  return {
    pid: readInt(p.pid, 'process.pid', 1, INT31),
    pgid: readInt(p.pgid, 'process.pgid', 1, INT31),
    bootId: nullable(p.bootId, (v) => readString(v, 'process.bootId', { max: 64 })),
  };
}

function readOutcome(value: unknown): RecordedOutcome {
  const o = readObject(value, 'outcome', ['status', 'exitCode', 'errorCode']);
  return {
    status: readEnum(o.status, 'outcome.status', COMPLETION_STATUSES),
    exitCode: nullable(o.exitCode, (v) => exitCode(v, 'outcome.exitCode')),
    errorCode: nullable(o.errorCode, (v) => readString(v, 'outcome.errorCode', { max: 64, pattern: CODE })),
  };
}

/** The invariants every stored record keeps; `parseJournalRecord` and every write check them. */
export function checkRecordInvariants(r: JournalRecord): void {
  if (PROCESS_STATES.includes(r.state) && r.process === null)
    throw new ValidationError('process', 'required_in_state');
  if (r.state === 'recovery_required' && r.recoveryReason === null)
    throw new ValidationError('recoveryReason', 'required_in_state');
  if (r.state === 'completion_acknowledged' && r.outcome === null)
    throw new ValidationError('outcome', 'required_in_state');
  if (isFinished(r.state) && r.leaseToken !== null)
    throw new ValidationError('leaseToken', 'kept_when_finished');
  if (!isFinished(r.state) && r.state !== 'recovery_required' && r.leaseToken === null)
    throw new ValidationError('leaseToken', 'required_in_state');
}

/** Strictly reads a record (a parsed file, or one about to be written); throws ValidationError. */
export function validateJournalRecord(value: unknown): JournalRecord {
  const r = readObject(value, '', FIELDS);
  if (r.schema !== JOURNAL_RECORD_SCHEMA) throw new ValidationError('schema', 'unknown_schema');
  const record: JournalRecord = {
    schema: JOURNAL_RECORD_SCHEMA,
    offerId: uuid(r.offerId, 'offerId'),
    runId: uuid(r.runId, 'runId'),
    attemptId: uuid(r.attemptId, 'attemptId'),
    leaseGeneration: readInt(r.leaseGeneration, 'leaseGeneration', 1, INT31),
    leaseToken: nullable(r.leaseToken, (v) =>
      readString(v, 'leaseToken', { max: 128, pattern: LEASE_TOKEN_PATTERN }),
    ),
    specDigest: readString(r.specDigest, 'specDigest', { max: 64, pattern: DIGEST }),
    state: readEnum(r.state, 'state', JOURNAL_STATES),
    createdAt: readString(r.createdAt, 'createdAt', { max: 24, pattern: ISO_TIME }),
    updatedAt: readString(r.updatedAt, 'updatedAt', { max: 24, pattern: ISO_TIME }),
    process: nullable(r.process, readProcess),
    exit: nullable(r.exit, (v) => {
      const e = readObject(v, 'exit', ['code', 'signal']);
      return {
        code: nullable(e.code, (c) => exitCode(c, 'exit.code')),
        signal: nullable(e.signal, (s) => readString(s, 'exit.signal', { max: 16, pattern: SIGNAL })),
      };
    }),
    outcome: nullable(r.outcome, readOutcome),
    recoveryReason: nullable(r.recoveryReason, (v) =>
      readString(v, 'recoveryReason', { max: 64, pattern: CODE }),
    ),
  };
  checkRecordInvariants(record);
  return record;
}

/** What an accepted offer brings to its record. */
export type OfferFields = Pick<
  JournalRecord,
  'offerId' | 'runId' | 'attemptId' | 'leaseGeneration' | 'specDigest'
> & {
  readonly leaseToken: string;
};

/** A fresh record in `accepted`, created and updated `at` (not validated: the caller does). */
export function acceptedRecord(offer: OfferFields, at: string): JournalRecord {
  return {
    schema: JOURNAL_RECORD_SCHEMA,
    ...offer,
    state: 'accepted',
    createdAt: at,
    updatedAt: at,
    process: null,
    exit: null,
    outcome: null,
    recoveryReason: null,
  };
}

/** The record frozen with its parts, so no holder can change what the next step starts from. */
export function freezeRecord(record: JournalRecord): JournalRecord {
  for (const part of [record.process, record.exit, record.outcome]) if (part) Object.freeze(part);
  return Object.freeze(record);
}

/** Strictly reads one record file's bytes; `name` is the file, for the error message. */
export function parseJournalRecord(text: string, name: string): JournalRecord {
  try {
    return validateJournalRecord(JSON.parse(text));
  } catch (error) {
    const why = error instanceof ValidationError ? `${error.field}: ${error.rule}` : 'not valid JSON';
    throw new JournalCorruptError(`journal record ${name} is unreadable (${why}); the worker stops pulling`);
  }
}
