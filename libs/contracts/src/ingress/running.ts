/**
 * `running` (R-ACT-1): the attempt's process started, under this handle; answered
 * `qinglong/remote-run-activation@v1`.
 *
 * Field history (`git log -S` on the contracts and the domain readers they came from). Served since
 * ba93662 (2026-12-02); first spoken by a worker in bb721f9 (2026-12-02): its v1.
 *
 * | field                                   | appeared           | wire |
 * | --------------------------------------- | ------------------ | ---- |
 * | request: the lease fence                | ba93662 2026-12-02 | v1   |
 * | request `executorHandle`                | ba93662 2026-12-02 | v1   |
 * | answer: see `activation-answer.ts`      | 7985e66 2026-12-01 | v1   |
 * | answer `snapshot.deadlineGraceMs`       | f9de650 2026-12-04 | v2   |
 */
import { ACTIVATION_LIMITS, EXECUTOR_HANDLE_PATTERN, readString } from '@ql/domain';
import { activationCall } from './activation-call';
import { LeaseFenceFields, LeaseFenceRequest, buildLeaseFence, readLeaseFence } from './lease-fence';
import { SessionFenceRequest } from './session';

export const RUNNING = activationCall('running');

export interface RunningRequest extends LeaseFenceRequest {
  /** The worker-side handle of the started process (shown to admins). */
  readonly executorHandle: string;
}

/** An executor handle: ≤ 128 characters of `[A-Za-z0-9._:-]` (the activation answer's own rule). */
export function readExecutorHandle(value: unknown, field = 'executorHandle'): string {
  return readString(value, field, {
    max: ACTIVATION_LIMITS.executorHandle,
    pattern: EXECUTOR_HANDLE_PATTERN,
  });
}

/** The worker's `running` body in wire order. */
export function buildRunningRequest(
  fence: SessionFenceRequest,
  fields: LeaseFenceFields & { readonly executorHandle: string },
): RunningRequest {
  return { ...buildLeaseFence(fence, fields), executorHandle: fields.executorHandle };
}

/** The control plane's reader of a `running` body (behind the DTO, ADR 0009). */
export function parseRunningRequest(body: unknown): RunningRequest {
  const fence = readLeaseFence(body, ['executorHandle']);
  return { ...fence, executorHandle: readExecutorHandle((body as Record<string, unknown>).executorHandle) };
}

export { parseActivationResponse as parseRunningAnswer } from './activation-answer';
