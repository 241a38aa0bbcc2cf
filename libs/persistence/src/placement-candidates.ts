import { PlacementCandidate, wireVersionOf } from '@ql/domain';
import { cachedCapabilities, rememberCapabilities } from './run-sql';
import { SqlExecutor, isTrue, toInt, toMs } from './sql-executor';

/** A worker row as placement reads it: the capabilities by digest, their document only when unseen. */
export interface CandidateRow {
  worker_id: string;
  status: 'online' | 'draining' | 'offline';
  disabled: number | boolean;
  lease_expires_at: number | Date;
  available_slots: number;
  max_concurrent_runs: number;
  capabilities_digest: string;
  active: number | string;
  software_version: string;
  protocol_version: number | string;
}

export const CANDIDATE_COLUMNS = `w.worker_id, w.status, w.disabled, w.lease_expires_at, w.available_slots,
  w.max_concurrent_runs, w.capabilities_digest, w.active_leases AS active, w.software_version,
  w.protocol_version`;

/**
 * The rows as candidates. Capabilities documents (up to 16 KiB each) are read, 64 workers per
 * statement, only for digests this replica has not parsed yet.
 */
export async function toCandidates(
  db: SqlExecutor,
  rows: readonly CandidateRow[],
): Promise<PlacementCandidate[]> {
  const unseen = rows.filter((r) => !cachedCapabilities(r.capabilities_digest));
  for (let i = 0; i < unseen.length; i += 64) {
    const params: Record<string, string> = {};
    const list = unseen.slice(i, i + 64).map((r, j) => {
      params[`w${j}`] = r.worker_id;
      return `:w${j}`;
    });
    const docs = await db.many<{ capabilities_digest: string; capabilities_json: string }>(
      `SELECT capabilities_digest, capabilities_json FROM workers WHERE worker_id IN (${list.join(', ')})`,
      params,
    );
    for (const d of docs) rememberCapabilities(d.capabilities_digest, d.capabilities_json);
  }
  const candidates: PlacementCandidate[] = [];
  for (const r of rows) {
    const capabilities = cachedCapabilities(r.capabilities_digest);
    if (!capabilities) continue; // re-registered between the two reads: seen at the next look
    candidates.push({
      workerId: r.worker_id,
      capabilities,
      // A version this replica does not speak is below every requirement (an older replica's rows).
      software: {
        softwareVersion: r.software_version,
        wireVersion: wireVersionOf(toInt(r.protocol_version)) ?? 1,
      },
      status: r.status,
      disabled: isTrue(r.disabled),
      leaseExpiresAt: toMs(r.lease_expires_at),
      availableSlots: toInt(r.available_slots),
      maxConcurrentRuns: toInt(r.max_concurrent_runs),
      activeLeases: toInt(r.active),
    });
  }
  return candidates;
}
