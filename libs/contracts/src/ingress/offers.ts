/**
 * `offers` (R-LSE-2, R-WRK-2): the worker's pull, answered `qinglong/remote-execution-offer@v1` — a
 * run with its pinned revision and a lease, or why there is none.
 *
 * Field history (`git log -S` on the contracts and the domain readers they came from). Served since
 * 0a84583 (2026-12-01); first spoken by a worker in bb721f9 (2026-12-02): its v1.
 *
 * | field                                                        | appeared           | wire |
 * | ------------------------------------------------------------ | ------------------ | ---- |
 * | request `generation`, `expectedVersion`, `offerId`, `leaseToken` | 0a84583 2026-12-01 | v1   |
 * | request `waitMs` (optional, long poll, ADR 0019)            | ef7eee6 2026-12-02 | v2   |
 * | answer `schema`, `status`, `run`, `execution`, `lease`, `idle` | 0a84583 2026-12-01 | v1   |
 * | answer `idle.reason` `preferred_elsewhere` (R-PLC-2)        | 4a991b2 2026-12-01 | v1   |
 * | answer `execution.spec` fields but the three below          | 0a84583 2026-12-01 | v1   |
 * | answer `execution.spec.timezone` (only when not UTC)        | c0d04b4 2026-12-04 | v2   |
 * | answer `execution.spec.secretEnv` (ADR 0050)                | 21941b5 2026-12-05 | v2   |
 * | answer `execution.spec.bundle` (ADR 0051)                   | 7ad63e2 2026-12-05 | v2   |
 *
 * The spec fields are optional and absent when a task does not use them (the digest of a spec
 * without them is the one it always had): a v1 worker can run a task that uses none of them.
 */
import {
  IDLE_REASONS,
  IdleReason,
  OFFER_WAIT_MAX_MS,
  TaskSpec,
  ValidationError,
  isUuidV7,
  parseTaskSpec,
  readInt,
  readObject,
  readString,
} from '@ql/domain';
import { ContractError, IngressCall, KiB } from './call';
import { OfferFieldsRequest, OfferedLease, readOfferFields, readOfferedLease } from './lease-fence';
import { SessionFenceRequest } from './session';

/** `qinglong/remote-execution-offer@v1` (R-LSE-2): the pull response, shared by control plane and worker. */
export const EXECUTION_OFFER_SCHEMA = 'qinglong/remote-execution-offer@v1';
export const EXECUTION_OFFER_MAX_BYTES = 128 * KiB;

export const OFFERS: IngressCall<'offers'> = {
  action: 'offers',
  bodyLimit: 4 * KiB,
  answerLimit: EXECUTION_OFFER_MAX_BYTES,
  schema: EXECUTION_OFFER_SCHEMA,
  firstReleased: 'bb721f9',
  since: {
    'request.waitMs': 2,
    'answer.execution.spec.timezone': 2,
    'answer.execution.spec.secretEnv': 2,
    'answer.execution.spec.bundle': 2,
  },
  refusals: [],
};

/** `offers` body: the offer fields and how long to wait for a run (long poll, ADR 0019). */
export interface PullRequest extends OfferFieldsRequest {
  /** Long poll: with nothing claimable, wait up to this long for a run (0 or absent: answer at once). */
  readonly waitMs?: number;
}

/** The worker's `offers` body in wire order; `waitMs` only for a long poll. */
export function buildPullRequest(
  fence: SessionFenceRequest,
  fields: Omit<PullRequest, keyof SessionFenceRequest>,
): PullRequest {
  const body = {
    generation: fence.generation,
    expectedVersion: fence.expectedVersion,
    offerId: fields.offerId,
    leaseToken: fields.leaseToken,
  };
  return fields.waitMs === undefined || fields.waitMs === 0 ? body : { ...body, waitMs: fields.waitMs };
}

/** The control plane's reader of an `offers` body (behind the DTO, ADR 0009). */
export function parsePullRequest(body: unknown): PullRequest {
  const raw = readObject(body, '', ['generation', 'expectedVersion', 'offerId', 'leaseToken', 'waitMs']);
  const fields = readOfferFields(raw);
  return raw.waitMs === undefined
    ? fields
    : { ...fields, waitMs: readInt(raw.waitMs, 'waitMs', 0, OFFER_WAIT_MAX_MS) };
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
export class OfferContractError extends ContractError {
  constructor(rule: string, message?: string) {
    super('offers', rule, message ?? `execution offer: ${rule}`);
  }
}

const INT31 = 2 ** 31 - 1;
const DIGEST = /^[0-9a-f]{64}$/;

function uuid(value: unknown, field: string): string {
  if (typeof value !== 'string' || !isUuidV7(value)) throw new ValidationError(field, 'invalid_uuid');
  return value;
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
    lease: readOfferedLease(top.lease),
  };
}
