/**
 * What the four session calls share (`register`, `heartbeat`, `drain`, `offline`; R-REG-3..6): the
 * session fence every session-scoped call carries, and the session projection every one answers.
 */
import {
  GENERATION_MAX,
  MAX_CONCURRENT_RUNS,
  SESSION_STATUSES,
  SessionFence,
  WorkerSession,
  VERSION_MAX,
  ValidationError,
  WORKER_ID_PATTERN,
  isUuidV7,
  readEnum,
  readInt,
  readObject,
  readString,
} from '@ql/domain';
import { IngressCall, KiB, answerJson, refusing } from './call';

/** The fence every session-scoped call carries (R-REG-5): the body's first two fields. */
export type SessionFenceRequest = SessionFence;

export function parseSessionFence(raw: Record<string, unknown>): SessionFence {
  return {
    generation: readInt(raw.generation, 'generation', 1, GENERATION_MAX),
    expectedVersion: readInt(raw.expectedVersion, 'expectedVersion', 0, VERSION_MAX),
  };
}

/** The session projection every session call answers with. */
export interface SessionResponse {
  readonly workerId: string;
  readonly sessionId: string;
  readonly generation: number;
  readonly version: number;
  readonly status: 'online' | 'draining' | 'offline';
  readonly leaseExpiresAt: string;
  readonly maxConcurrentRuns: number;
  readonly availableSlots: number;
}

/** The most cancel intents one heartbeat answer carries; the renew answer covers any beyond. */
export const MAX_HEARTBEAT_CANCELS = 64;

/** R-RUN-5: the heartbeat answer also names this session's held attempts whose run has a cancel request. */
export interface HeartbeatResponse extends SessionResponse {
  readonly cancelAttemptIds: string[];
}

export interface RegisterResponse extends SessionResponse {
  readonly outcome: 'created' | 'replayed' | 'replaced';
}

export const REGISTER_OUTCOMES = ['created', 'replayed', 'replaced'] as const;

/** The control plane's side: the session projection every session call answers, in wire order. */
export function buildSessionResponse(session: WorkerSession): SessionResponse {
  return {
    workerId: session.workerId,
    sessionId: session.sessionId,
    generation: session.generation,
    version: session.version,
    status: session.status,
    leaseExpiresAt: new Date(session.leaseExpiresAt).toISOString(),
    maxConcurrentRuns: session.maxConcurrentRuns,
    availableSlots: session.availableSlots,
  };
}

/** A session answer is a few hundred bytes; a heartbeat's 64 cancel ids add 2.5 KiB. */
export const SESSION_ANSWER_MAX_BYTES = 8 * KiB;

export const SESSION_ANSWER_FIELDS = [
  'workerId',
  'sessionId',
  'generation',
  'version',
  'status',
  'leaseExpiresAt',
  'maxConcurrentRuns',
  'availableSlots',
] as const;

const ISO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

/** Whose session the answer must be about: the worker's own id and the session it called. */
export interface SessionExpectation {
  readonly workerId: string;
  readonly sessionId: string;
}

/** `register`'s `outcome`, `heartbeat`'s `cancelAttemptIds`: what a session answer may add. */
type Extension = 'outcome' | 'cancelAttemptIds';

/**
 * The strict reader of a session answer (already JSON): exactly the projection's fields plus the
 * `extensions` allowed, each in range, about `expect`'s worker and session. Refusals are
 * `ContractError(call, '<field>:<rule>')`.
 */
export function readSessionAnswer(
  call: string,
  json: unknown,
  expect: SessionExpectation | undefined,
  extensions: readonly Extension[],
): SessionResponse & Partial<RegisterResponse & HeartbeatResponse> {
  return refusing(call, () => {
    const top = readObject(json, '', [...SESSION_ANSWER_FIELDS, ...extensions]);
    const workerId = readString(top.workerId, 'workerId', { max: 63, pattern: WORKER_ID_PATTERN });
    if (expect && workerId !== expect.workerId) throw new ValidationError('workerId', 'other_worker');
    if (typeof top.sessionId !== 'string' || !isUuidV7(top.sessionId))
      throw new ValidationError('sessionId', 'invalid_uuid');
    if (expect && top.sessionId !== expect.sessionId) throw new ValidationError('sessionId', 'other_session');
    if (top.outcome !== undefined) readEnum(top.outcome, 'outcome', REGISTER_OUTCOMES);
    readInt(top.generation, 'generation', 1, GENERATION_MAX);
    readInt(top.version, 'version', 0, VERSION_MAX);
    readEnum(top.status, 'status', SESSION_STATUSES);
    readString(top.leaseExpiresAt, 'leaseExpiresAt', { max: 24, pattern: ISO_TIME });
    readInt(top.maxConcurrentRuns, 'maxConcurrentRuns', 1, MAX_CONCURRENT_RUNS);
    readInt(top.availableSlots, 'availableSlots', 0, MAX_CONCURRENT_RUNS);
    if (top.cancelAttemptIds !== undefined) readCancelIds(top.cancelAttemptIds);
    // Checked field by field above: the answer is returned as it came.
    return top as unknown as SessionResponse & Partial<RegisterResponse & HeartbeatResponse>;
  });
}

function readCancelIds(value: unknown): void {
  if (!Array.isArray(value)) throw new ValidationError('cancelAttemptIds', 'must_be_array');
  if (value.length > MAX_HEARTBEAT_CANCELS) throw new ValidationError('cancelAttemptIds', 'too_many_items');
  value.forEach((id, i) => {
    if (typeof id !== 'string' || !isUuidV7(id))
      throw new ValidationError(`cancelAttemptIds[${i}]`, 'invalid_uuid');
  });
}

/**
 * Any session answer, as the worker's one session chain reads them alike: the projection, with
 * `outcome` and `cancelAttemptIds` allowed (each still checked when present).
 */
export function parseAnySessionAnswer(
  json: unknown,
  expect: SessionExpectation,
): SessionResponse & Partial<RegisterResponse & HeartbeatResponse> {
  return readSessionAnswer('session', json, expect, ['outcome', 'cancelAttemptIds']);
}

/** `drain` and `offline`: calls that carry only the session fence and answer the session alone. */
export function fenceOnlyCall<A extends 'drain' | 'offline'>(action: A) {
  const call: IngressCall<A> = {
    action,
    bodyLimit: 4 * KiB,
    answerLimit: SESSION_ANSWER_MAX_BYTES,
    firstReleased: 'e7d9752',
    since: {},
    refusals: [],
  };
  return {
    call,
    /** The worker's body in wire order. */
    build: (fields: SessionFenceRequest): SessionFenceRequest => ({
      generation: fields.generation,
      expectedVersion: fields.expectedVersion,
    }),
    /** The control plane's reader of the body (behind the DTO, ADR 0009). */
    parseRequest: (body: unknown): SessionFenceRequest =>
      parseSessionFence(readObject(body, '', ['generation', 'expectedVersion'])),
    /** The strict reader of the answer: the session projection alone. */
    parseAnswer: (bytes: string | Buffer, expect?: SessionExpectation): SessionResponse =>
      readSessionAnswer(action, answerJson(action, bytes, call.answerLimit), expect, []),
  };
}
