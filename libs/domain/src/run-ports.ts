import { RunEnvVar } from './env-vars';
import { LeaseRecord, IdleReason } from './leases';
import { PlacementCandidate, WorkerSoftware } from './placement';
import { AuditEntry } from './ports';
import { SessionFence } from './registration';
import { AttemptDetail, AttemptRecord, RunEvent, RunRecord, RunStatus, RunTrigger } from './runs';
import { CanonicalTaskSpec, TaskRecord, TaskRevisionRecord } from './tasks';

export interface PageQuery {
  readonly after?: string;
  readonly limit: number;
}

/** Tasks and their immutable execution revisions (R-RUN-1). */
export interface TaskRepository {
  /** A live name is unique: ConflictError('task_name_taken'). */
  create(id: string, spec: CanonicalTaskSpec, audit: AuditEntry): Promise<TaskRecord>;
  /** Serialised per task; a new revision only when the digest changes (`changed`). */
  update(
    id: string,
    spec: CanonicalTaskSpec,
    audit: AuditEntry,
  ): Promise<{ task: TaskRecord; changed: boolean }>;
  find(id: string): Promise<TaskRecord | null>;
  /** Pinned first, then creation order; searched, filtered (issue 31 item 3). */
  list(query: TaskListQuery): Promise<TaskListItem[]>;
  /** Enable/disable or pin/unpin (not a revision); NotFoundError for no live task. */
  setState(id: string, state: { enabled?: boolean; pinned?: boolean }, audit: AuditEntry): Promise<TaskRecord>;
  /** Soft delete: runs keep their pinned revisions; cron stops. */
  delete(id: string, audit: AuditEntry): Promise<TaskRecord>;
  listRevisions(id: string, query: { beforeRevision?: number; limit: number }): Promise<TaskRevisionRecord[]>;
  /** Revisions never change: callers may cache the result. */
  findRevision(taskId: string, revision: number): Promise<TaskRevisionRecord | null>;
  /** The names of these tasks (deleted ones too: a run names its task), one read. */
  names(ids: readonly string[]): Promise<Map<string, string>>;
  /** Live tasks with a cron schedule, in id order (keyset). */
  listScheduled(query: PageQuery): Promise<TaskRecord[]>;
}
export const TASK_REPOSITORY = Symbol('TaskRepository');

export interface TaskListQuery extends PageQuery {
  /** Part of the name or command, matched folded (`searchFold`). */
  readonly q?: string;
  readonly enabled?: boolean;
  /** The status of the task's newest run. */
  readonly lastStatus?: string;
}

export interface TaskListItem extends TaskRecord {
  readonly lastRun: { readonly id: string; readonly status: string } | null;
}

export interface TriggerRunCommand {
  readonly runId: string;
  readonly taskId: string;
  readonly trigger: RunTrigger;
  readonly priority?: number;
  /** Manual: the same key with the same request digest returns the first run; another digest is a conflict. */
  readonly idempotency?: { readonly key: string; readonly digest: string };
  /** Cron: one run per (task, scheduledAt) across all replicas and revisions. */
  readonly scheduledAt?: number;
  /** Cron: only fire a revision whose schedule existed at that time. */
  readonly revision?: number;
  readonly audit?: AuditEntry;
}

export interface RunListQuery {
  readonly status?: RunStatus;
  readonly taskId?: string;
  /** Runs with an attempt (any, not only the current one) on this worker: the `attempts_worker` index. */
  readonly workerId?: string;
  /** Keyset: runs with a smaller id (newest first). */
  readonly before?: string;
  readonly limit: number;
}

/** Runs, attempts and their event log (R-RUN-2..5). */
export interface RunRepository {
  /** Null when a cron run for that (task, scheduledAt) already exists, or the revision moved on. */
  trigger(command: TriggerRunCommand): Promise<{ run: RunRecord; created: boolean } | null>;
  find(id: string): Promise<RunRecord | null>;
  list(query: RunListQuery): Promise<RunRecord[]>;
  attempts(runId: string): Promise<AttemptDetail[]>;
  events(runId: string, query: { afterSeq: number; limit: number }): Promise<RunEvent[]>;
  /** The global env vars the run received, in order (ADR 0061). */
  envVars(runId: string): Promise<RunEnvVar[]>;
  /** Persists `cancel_requested` first; a run nobody holds (queued, retry_wait) is cancelled at once. */
  requestCancel(runId: string, audit: AuditEntry): Promise<RunRecord>;
  /** Live workers as placement candidates, for the "why pending" explanation (bounded). */
  placementCandidates(limit: number): Promise<{ now: number; candidates: PlacementCandidate[] }>;
}
export const RUN_REPOSITORY = Symbol('RunRepository');

export interface ClaimCommand {
  readonly workerId: string;
  readonly sessionId: string;
  readonly fence: SessionFence;
  readonly offerId: string;
  readonly tokenDigest: string;
  readonly leaseMs: number;
  /** How long a run with preferred rules waits for a better-scored worker after it was queued; 0 = never. */
  readonly preferenceHoldMs: number;
  /** The puller's session as placement reads it beside its capabilities (ADR 0062). */
  readonly software: WorkerSoftware;
}

/** The run and attempt as an offer names them (a claim writes them; it reads nothing back it knows). */
export type OfferedRun = Pick<RunRecord, 'id' | 'taskId' | 'revision' | 'specDigest'>;
export type OfferedAttempt = Pick<
  AttemptRecord,
  'id' | 'runId' | 'attemptNo' | 'status' | 'workerId' | 'leaseGeneration'
>;

/** A committed claim, everything the offer needs (R-LSE-2). */
export interface ClaimedOffer {
  readonly run: OfferedRun;
  readonly attempt: OfferedAttempt;
  readonly lease: LeaseRecord;
  readonly revision: TaskRevisionRecord;
}

export type ClaimResult =
  | { readonly kind: 'offered'; readonly replayed: boolean; readonly offer: ClaimedOffer }
  | {
      readonly kind: 'idle';
      readonly reason: IdleReason;
      readonly activeLeases: number;
      readonly capacity: number;
      readonly scanned: number;
    };

export interface LeaseCommand {
  readonly workerId: string;
  readonly sessionId: string;
  readonly fence: SessionFence;
  readonly offerId: string;
  readonly tokenDigest: string;
  readonly leaseGeneration: number;
  readonly leaseVersion: number;
  readonly leaseMs: number;
}

export interface SweepResult {
  readonly requeued: number;
  readonly lost: number;
  readonly cancelled: number;
  readonly retried: number;
  readonly failed: number;
}

/** Dispatch leases: claim by pull, renew, release, and the bounded sweeper (R-LSE-1..6). */
export interface LeaseRepository {
  /** Worker row locked for the whole claim (capacity); the run picked with SKIP LOCKED, then CAS. */
  claim(command: ClaimCommand): Promise<ClaimResult>;
  /** One CAS on (offer, token digest, lease generation, version, live term) under a live session. */
  renew(command: LeaseCommand): Promise<{ lease: LeaseRecord; cancelRequested: boolean }>;
  /** Before start only: the attempt goes back to the queue (or is cancelled if that was requested). */
  release(command: LeaseCommand): Promise<LeaseRecord>;
  /** Fixed work per call: at most `pageSize` expired leases and `pageSize` due retries, each in its own transaction. */
  sweep(pageSize: number): Promise<SweepResult>;
  findLease(offerId: string): Promise<LeaseRecord | null>;
}
export const LEASE_REPOSITORY = Symbol('LeaseRepository');
