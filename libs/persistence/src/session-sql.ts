import { SessionCommand, SessionStatus, WorkerSession } from '@ql/domain';
import { toInt, toMs } from './sql-executor';

/**
 * The worker row's session columns and the compare-and-set every fenced call shares: read by the
 * session repository and by the lease and activation repositories' fences (lease-fence.ts).
 */

export interface WorkerRow {
  worker_id: string;
  disabled: number | boolean;
  session_id: string;
  generation: number;
  version: number | string;
  status: SessionStatus;
  lease_expires_at: number | Date;
  max_concurrent_runs: number;
  available_slots: number;
  registration_digest: string;
  capabilities_json: string;
  capabilities_digest: string;
  software_version: string;
  protocol_version: number;
  registered_at: number | Date;
  last_seen_at: number | Date;
  recovery_required: number;
}

export type SessionRow = Pick<
  WorkerRow,
  | 'worker_id'
  | 'session_id'
  | 'generation'
  | 'version'
  | 'status'
  | 'lease_expires_at'
  | 'max_concurrent_runs'
  | 'available_slots'
  | 'registration_digest'
>;

/** What a session call answers with: never the capabilities document (up to 16 KiB) on the hot path. */
export const SESSION_COLUMNS = `worker_id, session_id, generation, version, status, lease_expires_at,
  max_concurrent_runs, available_slots, registration_digest`;

/** The compare-and-set every fenced session call shares (R-REG-5); keep it equal to `fenceViolation`. */
export function sessionFence(call: {
  workerId: string;
  sessionId: string;
  generation: string;
  version: string;
}) {
  return `worker_id = ${call.workerId} AND session_id = ${call.sessionId} AND generation = ${call.generation}
  AND version = ${call.version} AND disabled = :no AND status <> 'offline' AND lease_expires_at > {now}`;
}
export const SESSION_FENCE_SQL = sessionFence({
  workerId: ':workerId',
  sessionId: ':sessionId',
  generation: ':generation',
  version: ':expectedVersion',
});

export function fenceParams(command: SessionCommand) {
  return {
    workerId: command.workerId,
    sessionId: command.sessionId,
    generation: command.fence.generation,
    expectedVersion: command.fence.expectedVersion,
    leaseMs: command.leaseMs,
    no: false,
  };
}

export function toSession(row: SessionRow): WorkerSession {
  return {
    workerId: row.worker_id,
    sessionId: row.session_id,
    generation: toInt(row.generation),
    version: toInt(row.version),
    status: row.status,
    leaseExpiresAt: toMs(row.lease_expires_at),
    maxConcurrentRuns: toInt(row.max_concurrent_runs),
    availableSlots: toInt(row.available_slots),
    registrationDigest: row.registration_digest,
  };
}
