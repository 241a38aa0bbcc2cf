/**
 * `qinglong/remote-run-activation@v1` (R-ACT-3): the answer of `starting`, `running`,
 * `start-failure` and `completion`, built and read through this one module by both sides.
 *
 * Field history (`git log -S` on this contract). Served since ba93662 (2026-12-02); first read by a
 * worker in bb721f9 (2026-12-02): its v1.
 *
 * | field                                                                | appeared           | wire |
 * | -------------------------------------------------------------------- | ------------------ | ---- |
 * | `schema`, `status` (applied, already_starting/_running/_terminal)   | 7985e66 2026-12-01 | v1   |
 * | `snapshot` ids, statuses, lease version and generation, sequence    | 7985e66 2026-12-01 | v1   |
 * | `snapshot` deadlineAt, startedAt, finishedAt, executorHandle, logId, errorCode | 7985e66 2026-12-01 | v1 |
 * | `snapshot.deadlineGraceMs` (ADR 0028)                               | f9de650 2026-12-04 | v2   |
 */
import {
  ATTEMPT_STATUSES,
  AttemptStatus,
  RUN_STATUSES,
  RunStatus,
  UnavailableError,
  ValidationError,
  isUuidV7,
  readEnum,
  readInt,
  readObject,
  readString,
} from '@ql/domain';
import { parseStrictJson } from '../strict-json';
import { ContractError } from './call';

/** The answer's schema name and version (the body's `schema`). */
export const RUN_ACTIVATION_SCHEMA = 'qinglong/remote-run-activation@v1';
export const RUN_ACTIVATION_MAX_BYTES = 16 * 1024;

export const ACTIVATION_STATUSES = [
  'applied',
  'already_starting',
  'already_running',
  'already_terminal',
] as const;
export type ActivationStatus = (typeof ACTIVATION_STATUSES)[number];

export interface ActivationSnapshot {
  readonly runId: string;
  readonly attemptId: string;
  readonly runStatus: RunStatus;
  readonly attemptStatus: AttemptStatus;
  readonly leaseVersion: number;
  readonly leaseGeneration: number;
  readonly callbackSequence: number;
  readonly deadlineAt?: string;
  /**
   * How long after `deadlineAt` the control plane's sweeper may end the attempt (QL_RUN_DEADLINE_GRACE_MS):
   * the worker has every process of it dead by then (ADR 0028). Absent: the sweep may come at the deadline.
   */
  readonly deadlineGraceMs?: number;
  readonly startedAt?: string;
  readonly finishedAt?: string;
  readonly executorHandle?: string;
  readonly logId?: string;
  readonly errorCode?: string;
}

export interface RunActivationResponse {
  readonly schema: typeof RUN_ACTIVATION_SCHEMA;
  readonly status: ActivationStatus;
  readonly snapshot: ActivationSnapshot;
}

/** A response that breaks the contract; the worker treats it as a failed call. */
export class ActivationContractError extends ContractError {
  constructor(rule: string) {
    super('activation', rule, `run activation: ${rule}`);
  }
}

/** What the activation answer added after v1, for the four calls that answer it. */
export const ACTIVATION_ANSWER_SINCE = { 'answer.snapshot.deadlineGraceMs': 2 } as const;

const INT31 = 2 ** 31 - 1;
const ISO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const HANDLE = /^[A-Za-z0-9._:-]+$/;
const CODE = /^[a-z][a-z0-9_]*$/;
const SNAPSHOT_FIELDS = [
  'runId',
  'attemptId',
  'runStatus',
  'attemptStatus',
  'leaseVersion',
  'leaseGeneration',
  'callbackSequence',
  'deadlineAt',
  'deadlineGraceMs',
  'startedAt',
  'finishedAt',
  'executorHandle',
  'logId',
  'errorCode',
] as const;
/** Optional fields and their rules; absent means "not yet", never null. */
const OPTIONAL: Record<string, { max: number; pattern: RegExp }> = {
  deadlineAt: { max: 24, pattern: ISO_TIME },
  startedAt: { max: 24, pattern: ISO_TIME },
  finishedAt: { max: 24, pattern: ISO_TIME },
  executorHandle: { max: 128, pattern: HANDLE },
  logId: { max: 64, pattern: HANDLE },
  errorCode: { max: 64, pattern: CODE },
};

function uuid(value: unknown, field: string): string {
  if (typeof value !== 'string' || !isUuidV7(value)) throw new ValidationError(field, 'invalid_uuid');
  return value;
}

function readActivation(json: unknown): RunActivationResponse {
  const top = readObject(json, '', ['schema', 'status', 'snapshot']);
  if (top.schema !== RUN_ACTIVATION_SCHEMA) throw new ValidationError('schema', 'unknown_schema');
  const status = readEnum(top.status, 'status', ACTIVATION_STATUSES);
  const s = readObject(top.snapshot, 'snapshot', SNAPSHOT_FIELDS);
  const snapshot: Record<string, unknown> = {
    runId: uuid(s.runId, 'snapshot.runId'),
    attemptId: uuid(s.attemptId, 'snapshot.attemptId'),
    runStatus: readEnum(s.runStatus, 'snapshot.runStatus', RUN_STATUSES),
    attemptStatus: readEnum(s.attemptStatus, 'snapshot.attemptStatus', ATTEMPT_STATUSES),
    leaseVersion: readInt(s.leaseVersion, 'snapshot.leaseVersion', 0, Number.MAX_SAFE_INTEGER),
    leaseGeneration: readInt(s.leaseGeneration, 'snapshot.leaseGeneration', 1, INT31),
    callbackSequence: readInt(s.callbackSequence, 'snapshot.callbackSequence', 0, INT31),
  };
  for (const [field, rule] of Object.entries(OPTIONAL)) {
    if (s[field] !== undefined) snapshot[field] = readString(s[field], `snapshot.${field}`, rule);
  }
  if (s.deadlineGraceMs !== undefined)
    snapshot.deadlineGraceMs = readInt(s.deadlineGraceMs, 'snapshot.deadlineGraceMs', 0, INT31);
  return { schema: RUN_ACTIVATION_SCHEMA, status, snapshot: snapshot as unknown as ActivationSnapshot };
}

/**
 * The one strict parser (both sides): size, strict JSON (valid UTF-8, no duplicate keys), exact
 * shape, unknown fields, statuses, ranges, control characters, schema.
 */
export function parseActivationResponse(bytes: string | Buffer): RunActivationResponse {
  const buffer = typeof bytes === 'string' ? Buffer.from(bytes, 'utf8') : bytes;
  if (buffer.length > RUN_ACTIVATION_MAX_BYTES) throw new ActivationContractError('too_large');
  let json: unknown;
  try {
    json = parseStrictJson(buffer);
  } catch {
    throw new ActivationContractError('invalid_json');
  }
  try {
    return readActivation(json);
  } catch (error) {
    if (error instanceof ValidationError) throw new ActivationContractError(`${error.field}:${error.rule}`);
    throw error;
  }
}

/**
 * The control plane's side: the projection goes on the wire only if the same parser accepts it.
 * A corrupt internal projection is a 503 (`worker_ingress_unavailable`), never a leak.
 */
export function buildActivationResponse(
  status: ActivationStatus,
  snapshot: ActivationSnapshot,
): RunActivationResponse {
  const response = { schema: RUN_ACTIVATION_SCHEMA, status, snapshot };
  try {
    return parseActivationResponse(JSON.stringify(response));
  } catch (error) {
    if (error instanceof ActivationContractError)
      throw new UnavailableError('activation_projection_invalid', `activation answer refused: ${error.rule}`);
    throw error;
  }
}
