/**
 * Helpers of the call files' specs: a refusal's stable rule, or `accepted`. Kept beside the call
 * files so every spec reads refusals the same way.
 */
import { ValidationError, WorkerSession } from '@ql/domain';
import { ContractError } from './call';

/** The ContractError rule (`field:rule`) or the ValidationError `field: rule` a reader throws. */
export function refusalOf(read: () => unknown): string {
  try {
    read();
  } catch (error) {
    if (error instanceof ContractError) return error.rule;
    if (error instanceof ValidationError) return `${error.field}: ${error.rule}`;
    throw error;
  }
  return 'accepted';
}

/** A session as the store holds it, for the control plane's answer builders (lease 30 s after noon). */
export function storedSession(
  fields: Pick<WorkerSession, 'workerId' | 'sessionId' | 'generation' | 'version' | 'status'> &
    Pick<WorkerSession, 'maxConcurrentRuns' | 'availableSlots'>,
): WorkerSession {
  return {
    ...fields,
    leaseExpiresAt: Date.parse('2026-12-07T12:00:30.000Z'),
    registrationDigest: 'd'.repeat(64),
  };
}
