import {
  Capabilities,
  ClaimCommand,
  ClaimResult,
  IdGenerator,
  IllegalStateError,
  LeaseRecord,
  OfferedAttempt,
  WorkerSoftware,
  capabilityMismatch,
  preferenceLookup,
} from '@ql/domain';
import { ClaimBatchOptions, ClaimCallParams, ClaimCoalescer, DEFAULT_CLAIM_BATCH } from './claim-batch';
import { heldRuns } from './claim-preference';
import { cachedCapabilities, rememberCapabilities, storedPlacements } from './run-sql';
import { SqlDatabase, toInt, toMs } from './sql-executor';
import { readPinnedRevision } from './run-env-vars';

/**
 * ADR 0016: the PostgreSQL claim as one call of `ql_claim` (installed by migration), one round trip
 * and one commit in the steady state. The function decides nothing about placement: this replica
 * tells it which placements (by `md5(placement_json)`) it has already evaluated for the puller's
 * capabilities with the domain's own `capabilityMismatch` and `preferenceLookup`. What the function
 * cannot decide it answers without writing, and this loop learns it and asks again; a head the puller
 * does not match goes to the repository's transaction path (`'slow'`), which reads candidate pages.
 */
const CLAIM_IN_ONE = `SELECT * FROM ql_claim(:workerId, :sessionId::uuid, :generation::int4, :expectedVersion::int8,
  :caps, :offerId::uuid, :attemptId::uuid, :digest, :leaseMs::int8, :match, :holdable, :nomatch, :free, :skip,
  :holdMs::int8, {clockMs})`;

/** Calls of `ql_claim` one pull may make (each learns something or settles one held run) before the slow path. */
export const MAX_CLAIM_ROUNDS = 8;

/** What a replica keeps, at most, before it forgets and learns again (one round trip per entry). */
const MAX_SESSIONS = 4096;
const MAX_CAPABILITY_SETS = 256;
const MAX_PLACEMENTS_PER_SET = 256;

/** SQLSTATEs `ql_claim` raises: a concurrent call committed the same offer id; an invariant broke. */
const OFFER_TAKEN = 'QLR01';
const INVARIANT = 'QLS01';

type PlacementClass = 'match' | 'holdable' | 'nomatch';

interface ClaimRow {
  kind: 'offered' | 'idle' | 'explain' | 'capabilities' | 'placement' | 'preference' | 'slow';
  reason: 'no_queued_runs' | 'preferred_elsewhere' | null;
  active_leases: number | null;
  capacity: number | null;
  scanned: number | null;
  caps_digest: string | null;
  caps_json: string | null;
  run_id: string | null;
  task_id: string | null;
  revision: number | null;
  spec_digest: string | null;
  placement_digest: string | null;
  placement_json: string | null;
  queue_order: string | null;
  now_ms: string | null;
  attempt_id: string | null;
  attempt_no: number | null;
  lease_generation: number | null;
  expires_at: Date | null;
  claimed_at: Date | null;
}

/** Placement classes per capabilities digest, with the comma-joined lists the function takes. */
class PlacementKnowledge {
  private readonly classes = new Map<string, PlacementClass>();
  private lists: { match: string; holdable: string; nomatch: string } | undefined;

  get size(): number {
    return this.classes.size;
  }

  learn(
    placementDigest: string,
    placementJson: string,
    capabilities: Capabilities,
    software: WorkerSoftware,
  ): void {
    const spec = storedPlacements.get(placementJson);
    let cls: PlacementClass = 'match';
    if (capabilityMismatch(spec, capabilities, software) !== null) cls = 'nomatch';
    // Labels the puller lacks, asked as if the hold were open: a run of this placement may be held.
    else if (preferenceLookup({ workerId: '', capabilities, spec, queuedAt: 0, now: 0, holdMs: 1 }).length)
      cls = 'holdable';
    if (this.classes.size >= MAX_PLACEMENTS_PER_SET) this.classes.clear();
    this.classes.set(placementDigest, cls);
    this.lists = undefined;
  }

  params(): { match: string; holdable: string; nomatch: string } {
    if (!this.lists) {
      const of = (cls: PlacementClass) =>
        [...this.classes]
          .filter(([, c]) => c === cls)
          .map(([digest]) => digest)
          .join(',');
      this.lists = { match: of('match'), holdable: of('holdable'), nomatch: of('nomatch') };
    }
    return this.lists;
  }
}

/**
 * Per replica: the capabilities digest of each session, and what is known per capabilities digest and
 * session software (placement reads the worker's software and wire versions too, ADR 0062).
 */
const sessionCapabilities = new Map<string, string>();
const knowledge = new Map<string, PlacementKnowledge>();

function knowledgeOf(capabilitiesDigest: string, software: WorkerSoftware): PlacementKnowledge {
  const key = `${capabilitiesDigest} ${software.wireVersion} ${software.softwareVersion}`;
  let known = knowledge.get(key);
  if (!known) {
    if (knowledge.size >= MAX_CAPABILITY_SETS) knowledge.clear();
    known = new PlacementKnowledge();
    knowledge.set(key, known);
  }
  return known;
}

export class OneStatementClaim {
  private readonly coalescer: ClaimCoalescer<ClaimRow>;

  constructor(
    private readonly db: SqlDatabase,
    private readonly ids: IdGenerator,
    batch: ClaimBatchOptions = DEFAULT_CLAIM_BATCH,
  ) {
    this.coalescer = new ClaimCoalescer<ClaimRow>(
      db,
      (params: ClaimCallParams) => this.db.one<ClaimRow>(CLAIM_IN_ONE, { ...params }),
      batch,
    );
  }

  /**
   * The claim's answer, `'explain'` when the fence, a replay, draining or capacity must be named (read
   * by the caller), or `'slow'` when the transaction path must decide.
   */
  async claim(command: ClaimCommand): Promise<ClaimResult | 'explain' | 'slow'> {
    const skip: string[] = [];
    const free: string[] = [];
    for (let round = 0; round < MAX_CLAIM_ROUNDS; round++) {
      const digest = sessionCapabilities.get(command.sessionId);
      const capabilities = digest === undefined ? undefined : cachedCapabilities(digest);
      const known = capabilities
        ? knowledgeOf(digest!, command.software).params()
        : { match: '', holdable: '', nomatch: '' };
      const row = await this.call(command, capabilities ? digest! : null, known, free, skip);
      switch (row.kind) {
        case 'offered':
          return this.offered(command, row);
        case 'idle':
          return {
            kind: 'idle',
            reason: row.reason!,
            activeLeases: toInt(row.active_leases),
            capacity: toInt(row.capacity),
            scanned: toInt(row.scanned),
          };
        case 'explain':
        case 'slow':
          return row.kind;
        case 'capabilities':
          if (sessionCapabilities.size >= MAX_SESSIONS) sessionCapabilities.clear();
          sessionCapabilities.set(command.sessionId, row.caps_digest!);
          rememberCapabilities(row.caps_digest!, row.caps_json!);
          break;
        case 'placement':
          knowledgeOf(digest!, command.software).learn(
            row.placement_digest!,
            row.placement_json!,
            capabilities!,
            command.software,
          );
          break;
        case 'preference': {
          const run = {
            id: row.run_id!,
            spec: storedPlacements.get(row.placement_json!),
            queuedAt: toInt(row.queue_order),
          };
          const puller = { workerId: command.workerId, capabilities: capabilities! };
          const held = await heldRuns(this.db, puller, [run], toInt(row.now_ms), command.preferenceHoldMs);
          if (held.has(run.id)) skip.push(run.id);
          else free.push(`${run.id}@${run.queuedAt}`); // this queueing only: a requeue starts a new hold
          break;
        }
      }
    }
    return 'slow';
  }

  private async call(
    command: ClaimCommand,
    caps: string | null,
    known: { match: string; holdable: string; nomatch: string },
    free: readonly string[],
    skip: readonly string[],
  ): Promise<ClaimRow> {
    try {
      const row = await this.coalescer.call({
        workerId: command.workerId,
        sessionId: command.sessionId,
        generation: command.fence.generation,
        expectedVersion: command.fence.expectedVersion,
        caps,
        offerId: command.offerId,
        attemptId: this.ids.uuidV7(),
        digest: command.tokenDigest,
        leaseMs: command.leaseMs,
        ...known,
        free: free.join(','),
        skip: skip.join(','),
        holdMs: command.preferenceHoldMs,
      });
      // No row only when the worker row went away between two reads of the call: explained as a miss.
      return row ?? ({ kind: 'explain' } as ClaimRow);
    } catch (error) {
      const code = (error as { code?: string }).code;
      // A concurrent call committed this offer id first: the same answer as a replay.
      if (code === OFFER_TAKEN) return { kind: 'explain' } as ClaimRow;
      if (code === INVARIANT) throw new IllegalStateError((error as Error).message);
      throw error;
    }
  }

  private async offered(command: ClaimCommand, row: ClaimRow): Promise<ClaimResult> {
    const run = {
      id: row.run_id!,
      taskId: row.task_id!,
      revision: toInt(row.revision),
      specDigest: row.spec_digest!,
    };
    const revision = await readPinnedRevision(this.db, run);
    if (!revision) throw new IllegalStateError(`run ${run.id} pins a missing revision`);
    const attempt = {
      id: row.attempt_id!,
      runId: run.id,
      attemptNo: toInt(row.attempt_no),
      status: 'claimed' as const,
      workerId: command.workerId,
      leaseGeneration: toInt(row.lease_generation),
    };
    return {
      kind: 'offered',
      replayed: false,
      offer: {
        run,
        attempt,
        lease: claimedLease(command, attempt, row),
        revision,
      },
    };
  }
}

/** The lease a claim has just written, as the offer names it (its digest stays in the database). */
export function claimedLease(
  command: ClaimCommand,
  attempt: Pick<OfferedAttempt, 'id' | 'runId' | 'leaseGeneration'>,
  written: { expires_at: unknown; claimed_at: unknown },
): LeaseRecord {
  return {
    offerId: command.offerId,
    attemptId: attempt.id,
    runId: attempt.runId,
    workerId: command.workerId,
    sessionId: command.sessionId,
    sessionGeneration: command.fence.generation,
    leaseGeneration: attempt.leaseGeneration,
    version: 0,
    state: 'active',
    expiresAt: toMs(written.expires_at),
    claimedAt: toMs(written.claimed_at),
  };
}
