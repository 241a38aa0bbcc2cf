import { LeaseFenceCommand, leaseTokenDigest, parseSessionId } from '@ql/domain';
import { parseLeaseFence } from '@ql/contracts';
import { WorkerPrincipal } from '../identity/worker-principal';

/**
 * The session + lease fence of a lease holder's call, for renew, release and every activation step.
 * `fenceBody` holds only the six fence fields (the contract's reader refuses any other); the token is
 * digested here and never kept.
 */
export function leaseFenceCommand(
  principal: WorkerPrincipal,
  sessionId: string,
  fenceBody: unknown,
): LeaseFenceCommand {
  const fence = parseLeaseFence(fenceBody);
  return {
    workerId: principal.workerId,
    sessionId: parseSessionId(sessionId),
    fence: { generation: fence.generation, expectedVersion: fence.expectedVersion },
    offerId: fence.offerId,
    tokenDigest: leaseTokenDigest(fence.leaseToken),
    leaseGeneration: fence.leaseGeneration,
    leaseVersion: fence.leaseVersion,
  };
}
