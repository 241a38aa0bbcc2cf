/**
 * `heartbeat` (R-REG-6): the session is alive, with the slots free now; answered with the session
 * and the cancel intents of the attempts it holds (R-RUN-5).
 *
 * Field history (`git log -S` on the contracts and the domain readers they came from):
 *
 * | field                                           | appeared           | wire |
 * | ----------------------------------------------- | ------------------ | ---- |
 * | request `generation`, `expectedVersion`         | e7d9752 2026-12-01 | v1   |
 * | request `availableSlots`                        | e7d9752 2026-12-01 | v1   |
 * | request `recoveryRequired` (optional, ADR 0029) | 86ce85a 2026-12-04 | v2   |
 * | answer: the session projection                  | e7d9752 2026-12-01 | v1   |
 * | answer `cancelAttemptIds` (R-RUN-5)             | af7e7aa 2026-12-02 | v2   |
 */
import { MAX_CONCURRENT_RUNS, WorkerSession, readInt, readObject } from '@ql/domain';
import { IngressCall, KiB, answerJson } from './call';
import {
  HeartbeatResponse,
  SESSION_ANSWER_MAX_BYTES,
  SessionExpectation,
  SessionFenceRequest,
  buildSessionResponse,
  parseSessionFence,
  readSessionAnswer,
} from './session';

/** A worker journal holds at most this many records (SPEC §12), so at most this many need recovery. */
export const MAX_RECOVERY_REQUIRED = 1024;

export const HEARTBEAT: IngressCall<'heartbeat'> = {
  action: 'heartbeat',
  bodyLimit: 4 * KiB,
  answerLimit: SESSION_ANSWER_MAX_BYTES,
  firstReleased: 'e7d9752',
  since: { 'request.recoveryRequired': 2, 'answer.cancelAttemptIds': 2 },
  refusals: [],
};

export interface HeartbeatRequest extends SessionFenceRequest {
  readonly availableSlots: number;
  /**
   * Journal records of the worker that wait for an operator (`recovery_required`, ADR 0029); absent
   * means 0. At most the journal's record bound.
   */
  readonly recoveryRequired?: number;
}

/** The worker's `heartbeat` body in wire order; `recoveryRequired` only when some records wait. */
export function buildHeartbeatRequest(fields: HeartbeatRequest): HeartbeatRequest {
  const { generation, expectedVersion, availableSlots, recoveryRequired } = fields;
  return recoveryRequired === undefined || recoveryRequired === 0
    ? { generation, expectedVersion, availableSlots }
    : { generation, expectedVersion, availableSlots, recoveryRequired };
}

/** The control plane's reader of a `heartbeat` body (behind the DTO, ADR 0009). */
export function parseHeartbeat(body: unknown): HeartbeatRequest {
  const raw = readObject(body, '', ['generation', 'expectedVersion', 'availableSlots', 'recoveryRequired']);
  return {
    ...parseSessionFence(raw),
    availableSlots: readInt(raw.availableSlots, 'availableSlots', 0, MAX_CONCURRENT_RUNS),
    ...(raw.recoveryRequired === undefined
      ? {}
      : { recoveryRequired: readInt(raw.recoveryRequired, 'recoveryRequired', 0, MAX_RECOVERY_REQUIRED) }),
  };
}

/** The control plane's `heartbeat` answer: the session, then the cancel intents it found. */
export function buildHeartbeatResponse(
  session: WorkerSession,
  cancelAttemptIds: readonly string[],
): HeartbeatResponse {
  return { ...buildSessionResponse(session), cancelAttemptIds: [...cancelAttemptIds] };
}

/** The strict reader of the `heartbeat` answer: the session projection and its cancel intents. */
export function parseHeartbeatAnswer(bytes: string | Buffer, expect?: SessionExpectation): HeartbeatResponse {
  const json = answerJson('heartbeat', bytes, HEARTBEAT.answerLimit);
  const answer = readSessionAnswer('heartbeat', json, expect, ['cancelAttemptIds']);
  return answer.cancelAttemptIds ? (answer as HeartbeatResponse) : { ...answer, cancelAttemptIds: [] };
}
