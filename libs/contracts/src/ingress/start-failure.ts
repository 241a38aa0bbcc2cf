/**
 * `start-failure` (R-ACT-2): the attempt could not start, and why; answered
 * `qinglong/remote-run-activation@v1`.
 *
 * Field history (`git log -S` on the contracts and the domain readers they came from). Served since
 * ba93662 (2026-12-02); first spoken by a worker in bb721f9 (2026-12-02): its v1.
 *
 * | field                                   | appeared           | wire |
 * | --------------------------------------- | ------------------ | ---- |
 * | request: the lease fence                | ba93662 2026-12-02 | v1   |
 * | request `errorCode`                     | ba93662 2026-12-02 | v1   |
 * | answer: see `activation-answer.ts`      | 7985e66 2026-12-01 | v1   |
 * | answer `snapshot.deadlineGraceMs`       | f9de650 2026-12-04 | v2   |
 *
 * The codes a worker reports are its own (`spawn_failed`, `secrets_unavailable`, `cancel_requested`, …):
 * the contract fixes their form, not their list.
 */
import { ACTIVATION_LIMITS, ERROR_CODE_PATTERN, readString } from '@ql/domain';
import { activationCall } from './activation-call';
import { LeaseFenceFields, LeaseFenceRequest, buildLeaseFence, readLeaseFence } from './lease-fence';
import { SessionFenceRequest } from './session';

export const START_FAILURE = activationCall('start-failure');

export interface StartFailureRequest extends LeaseFenceRequest {
  readonly errorCode: string;
}

/** An error code: ≤ 64 characters of `[a-z][a-z0-9_]*` (the activation answer's own rule). */
export function readErrorCode(value: unknown, field = 'errorCode'): string {
  return readString(value, field, { max: ACTIVATION_LIMITS.errorCode, pattern: ERROR_CODE_PATTERN });
}

/** The worker's `start-failure` body in wire order. */
export function buildStartFailureRequest(
  fence: SessionFenceRequest,
  fields: LeaseFenceFields & { readonly errorCode: string },
): StartFailureRequest {
  return { ...buildLeaseFence(fence, fields), errorCode: fields.errorCode };
}

/** The control plane's reader of a `start-failure` body (behind the DTO, ADR 0009). */
export function parseStartFailureRequest(body: unknown): StartFailureRequest {
  const fence = readLeaseFence(body, ['errorCode']);
  return { ...fence, errorCode: readErrorCode((body as Record<string, unknown>).errorCode) };
}

export { parseActivationResponse as parseStartFailureAnswer } from './activation-answer';
