import {
  IDLE_REASONS,
  IdleReason,
  TaskSpec,
  ValidationError,
  isUuidV7,
  parseTaskSpec,
  readInt,
  readObject,
  readString,
} from '@ql/domain';

/** `qinglong/remote-execution-offer@v1` (R-LSE-2): the pull response, shared by control plane and worker. */
export const EXECUTION_OFFER_SCHEMA = 'qinglong/remote-execution-offer@v1';
export const EXECUTION_OFFER_MAX_BYTES = 128 * 1024;

export interface OfferedLease {
  readonly offerId: string;
  readonly sessionGeneration: number;
  readonly leaseGeneration: number;
  readonly version: number;
  readonly expiresAt: string;
}

export interface ExecutionOffer {
  readonly schema: typeof EXECUTION_OFFER_SCHEMA;
  readonly status: 'offered';
  readonly run: {
    readonly runId: string;
    readonly taskId: string;
    readonly revision: number;
    readonly attemptId: string;
    readonly attemptNo: number;
  };
  /** The pinned revision; `digest` is the SHA-256 of its canonical JSON. */
  readonly execution: { readonly digest: string; readonly spec: TaskSpec };
  /** Lease projection: never the token or its digest. */
  readonly lease: OfferedLease;
}

export interface IdleOffer {
  readonly schema: typeof EXECUTION_OFFER_SCHEMA;
  readonly status: 'idle';
  readonly idle: {
    readonly reason: IdleReason;
    readonly activeLeases: number;
    readonly capacity: number;
    readonly scanned: number;
  };
}

export type OfferResponse = ExecutionOffer | IdleOffer;

/** A response that breaks the contract; the worker treats it as a failed call. */
export class OfferContractError extends Error {
  constructor(
    readonly rule: string,
    message?: string,
  ) {
    super(message ?? `execution offer: ${rule}`);
    this.name = 'OfferContractError';
  }
}

const INT31 = 2 ** 31 - 1;
const ISO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const DIGEST = /^[0-9a-f]{64}$/;

function uuid(value: unknown, field: string): string {
  if (typeof value !== 'string' || !isUuidV7(value)) throw new ValidationError(field, 'invalid_uuid');
  return value;
}

function readLease(value: unknown): OfferedLease {
  const l = readObject(value, 'lease', [
    'offerId',
    'sessionGeneration',
    'leaseGeneration',
    'version',
    'expiresAt',
  ]);
  return {
    offerId: uuid(l.offerId, 'lease.offerId'),
    sessionGeneration: readInt(l.sessionGeneration, 'lease.sessionGeneration', 1, INT31),
    leaseGeneration: readInt(l.leaseGeneration, 'lease.leaseGeneration', 1, INT31),
    version: readInt(l.version, 'lease.version', 0, Number.MAX_SAFE_INTEGER),
    expiresAt: readString(l.expiresAt, 'lease.expiresAt', { max: 24, pattern: ISO_TIME }),
  };
}

/**
 * The one strict parser of the offer (both sides): size, JSON, exact shape, unknown fields, ranges,
 * and that the pinned spec is canonical and matches its digest.
 */
export function parseOfferResponse(bytes: string | Buffer): OfferResponse {
  const size = typeof bytes === 'string' ? Buffer.byteLength(bytes, 'utf8') : bytes.length;
  if (size > EXECUTION_OFFER_MAX_BYTES) throw new OfferContractError('too_large');
  let json: unknown;
  try {
    json = JSON.parse(typeof bytes === 'string' ? bytes : bytes.toString('utf8'));
  } catch {
    throw new OfferContractError('invalid_json');
  }
  try {
    return readOffer(json);
  } catch (error) {
    if (error instanceof ValidationError) throw new OfferContractError(`${error.field}:${error.rule}`);
    throw error;
  }
}

function readOffer(json: unknown): OfferResponse {
  const top = readObject(json, '', ['schema', 'status', 'run', 'execution', 'lease', 'idle']);
  if (top.schema !== EXECUTION_OFFER_SCHEMA) throw new ValidationError('schema', 'unknown_schema');
  if (top.status === 'idle') {
    readObject(json, '', ['schema', 'status', 'idle']);
    const i = readObject(top.idle, 'idle', ['reason', 'activeLeases', 'capacity', 'scanned']);
    if (typeof i.reason !== 'string' || !(IDLE_REASONS as readonly string[]).includes(i.reason))
      throw new ValidationError('idle.reason', 'unknown_reason');
    return {
      schema: EXECUTION_OFFER_SCHEMA,
      status: 'idle',
      idle: {
        reason: i.reason as IdleReason,
        activeLeases: readInt(i.activeLeases, 'idle.activeLeases', 0, 1024),
        capacity: readInt(i.capacity, 'idle.capacity', 0, 1024),
        scanned: readInt(i.scanned, 'idle.scanned', 0, 1_000_000),
      },
    };
  }
  if (top.status !== 'offered') throw new ValidationError('status', 'unknown_status');
  readObject(json, '', ['schema', 'status', 'run', 'execution', 'lease']);
  const r = readObject(top.run, 'run', ['runId', 'taskId', 'revision', 'attemptId', 'attemptNo']);
  const e = readObject(top.execution, 'execution', ['digest', 'spec']);
  const digest = readString(e.digest, 'execution.digest', { max: 64, pattern: DIGEST });
  const parsed = parseTaskSpec(e.spec);
  if (parsed.digest !== digest) throw new ValidationError('execution.digest', 'digest_mismatch');
  return {
    schema: EXECUTION_OFFER_SCHEMA,
    status: 'offered',
    run: {
      runId: uuid(r.runId, 'run.runId'),
      taskId: uuid(r.taskId, 'run.taskId'),
      revision: readInt(r.revision, 'run.revision', 1, INT31),
      attemptId: uuid(r.attemptId, 'run.attemptId'),
      attemptNo: readInt(r.attemptNo, 'run.attemptNo', 1, 1000),
    },
    execution: { digest, spec: parsed.spec },
    lease: readLease(top.lease),
  };
}

/** What renew answers with: the lease projection and whether a cancel was requested (R-RUN-5). */
export interface RenewResponse {
  readonly lease: OfferedLease;
  readonly cancelRequested: boolean;
}

/** What release answers with: the ended lease's projection. */
export interface ReleaseResponse {
  readonly lease: OfferedLease;
}

/**
 * The worker's strict reader of a `renew` (lease and `cancelRequested`) or `release` (lease only)
 * answer: exact shape, no unknown fields, the lease projection's ranges.
 */
export function parseLeaseAnswer(json: unknown, action: 'renew'): RenewResponse;
export function parseLeaseAnswer(json: unknown, action: 'release'): ReleaseResponse;
export function parseLeaseAnswer(
  json: unknown,
  action: 'renew' | 'release',
): RenewResponse | ReleaseResponse {
  try {
    if (action === 'release') return { lease: readLease(readObject(json, '', ['lease']).lease) };
    const top = readObject(json, '', ['lease', 'cancelRequested']);
    if (typeof top.cancelRequested !== 'boolean')
      throw new ValidationError('cancelRequested', 'must_be_boolean');
    return { lease: readLease(top.lease), cancelRequested: top.cancelRequested };
  } catch (error) {
    if (error instanceof ValidationError) throw new OfferContractError(`${error.field}:${error.rule}`);
    throw error;
  }
}
