import { RegistrationSnapshot, SessionFence } from './registration';
import { WorkerSession, WorkerStatus } from './sessions';

/** Time comes in through this port; on PostgreSQL the adapters read the database clock instead. */
export interface Clock {
  now(): number;
}
export const CLOCK = Symbol('Clock');

export interface IdGenerator {
  uuidV7(): string;
}
export const ID_GENERATOR = Symbol('IdGenerator');

export interface RegisterSessionCommand {
  readonly workerId: string;
  readonly sessionId: string;
  readonly snapshot: RegistrationSnapshot;
  readonly leaseMs: number;
  /** SHA-256 (hex) of the client certificate the session registered with (ADR 0045 §4), kept per session. */
  readonly certificateFingerprint?: string;
}

export interface SessionCommand {
  readonly workerId: string;
  readonly sessionId: string;
  readonly fence: SessionFence;
  readonly leaseMs: number;
}

export interface HeartbeatCommand extends SessionCommand {
  readonly availableSlots: number;
  /** Journal records waiting for an operator, as the worker reported (ADR 0029); absent: 0. */
  readonly recoveryRequired?: number;
}

/** One caller's share of a batched heartbeat (ADR 0018). */
export interface HeartbeatAnswer {
  readonly session: WorkerSession;
  /**
   * The session's held attempts whose run has a cancel request (R-RUN-5), read in the same statement;
   * null when the call was answered as a replay (nothing written): the caller reads them itself.
   */
  readonly cancelAttemptIds: readonly string[] | null;
}

export interface RegistrationResult {
  readonly outcome: 'created' | 'replayed' | 'replaced';
  readonly session: WorkerSession;
}

/** A worker as the admin API shows it. */
export interface WorkerRecord {
  readonly workerId: string;
  readonly disabled: boolean;
  /** The effective status, computed with the database's clock when read (ADR 0035). */
  readonly status: WorkerStatus;
  readonly session: WorkerSession;
  readonly capabilities: unknown;
  readonly capabilitiesDigest: string;
  readonly softwareVersion: string;
  readonly protocolVersion: number;
  readonly registeredAt: number;
  readonly lastSeenAt: number;
  /** Journal records waiting for an operator, as the current session's last heartbeat said (ADR 0029). */
  readonly recoveryRequired: number;
  /**
   * The validity of its current certificate issued here (enrollment or renewal, ADR 0045 §4: neither
   * superseded nor revoked); null when it has none (a certificate made by hand or by the dev PKI).
   */
  readonly certificate: {
    readonly issuedAt: number;
    readonly notAfter: number;
    /** SHA-256 (hex) of its DER: the certificate the worker holds since its last enrollment or renewal. */
    readonly fingerprint: string;
  } | null;
}

export interface WorkerListQuery {
  /** The effective status (ADR 0035), filtered in SQL against the database's clock. */
  readonly status?: WorkerStatus;
  /** One label the worker declared, matched exactly on key and value. */
  readonly label?: { readonly key: string; readonly value: string };
  readonly capabilitiesDigest?: string;
  readonly afterWorkerId?: string;
  readonly limit: number;
}

/** A run lease a worker's session holds and that has not expired: what the worker is running now. */
export interface WorkerActiveRun {
  readonly runId: string;
  readonly attemptId: string;
  readonly attemptNo: number;
  readonly attemptStatus: string;
  readonly offerId: string;
  readonly sessionId: string;
  readonly leaseGeneration: number;
  readonly leaseExpiresAt: number;
  readonly startedAt: number | null;
  readonly deadlineAt: number | null;
}

/** Sessions of workers: registration, heartbeat CAS, drain, offline, fencing (R-REG-3..7). */
export interface WorkerSessionRepository {
  /** Serialised per worker: SQLite BEGIN IMMEDIATE; PostgreSQL advisory lock on the worker id + row lock. */
  register(command: RegisterSessionCommand): Promise<RegistrationResult>;
  /** One compare-and-set on (worker, session, generation, version, live lease); misses name a FenceReason. */
  heartbeat(command: HeartbeatCommand): Promise<WorkerSession>;
  /**
   * Many heartbeats, each the same CAS as `heartbeat`, in one statement and one commit (a worker named
   * twice takes one more statement per repeat); each entry settles with its own answer or its own
   * refusal, as `heartbeat` would. Rejects as a whole only when the statement itself fails.
   */
  heartbeatBatch(
    commands: readonly HeartbeatCommand[],
    cancelLimit: number,
  ): Promise<PromiseSettledResult<HeartbeatAnswer>[]>;
  /** Same CAS as heartbeat; capacity drops to 0 and the lease keeps being extended. */
  drain(command: SessionCommand): Promise<WorkerSession>;
  /** Same CAS; the session ends and can never be used again. */
  offline(command: SessionCommand): Promise<WorkerSession>;
  /**
   * Sets the disabled flag, fences the current session and appends the audit entry in one transaction
   * (R-ID-4). Clearing it (enable) needs a disabled worker: ConflictError('worker_not_disabled').
   */
  setDisabled(workerId: string, disabled: boolean, audit: AuditEntry): Promise<WorkerRecord>;
  findWorker(workerId: string): Promise<WorkerRecord | null>;
  listWorkers(query: WorkerListQuery): Promise<WorkerRecord[]>;
  /** Live leases of any of the worker's sessions, soonest expiry first, at most `limit`. */
  activeRuns(workerId: string, limit: number): Promise<WorkerActiveRun[]>;
  /** The certificate fingerprint a session registered with; null when none was recorded (or no such session). */
  sessionCertificate(sessionId: string): Promise<string | null>;
  /**
   * Admin drain: the live, online session goes to draining (capacity 0) without moving its version,
   * so the worker's next heartbeat is accepted and answers `draining`. NotFoundError for an unknown
   * worker, ConflictError('worker_not_online') when its session is offline, expired or disabled.
   * Every ConflictError of these admin moves names the next step that works.
   */
  drainWorker(workerId: string, audit: AuditEntry): Promise<WorkerRecord>;
  /**
   * Admin resume, the reverse of drain (ADR 0035): the live session goes back to online with its full
   * capacity, version kept, so the worker's next heartbeat answers `online` and it pulls again.
   * NotFoundError, ConflictError('worker_not_draining') when its session is offline, expired or disabled.
   */
  resumeWorker(workerId: string, audit: AuditEntry): Promise<WorkerRecord>;
  /**
   * Deletes the worker row (and its labels) when its session is offline, expired or disabled and none of its
   * leases is still active; sessions, attempts, leases and events keep naming it. NotFoundError,
   * ConflictError('worker_not_offline' | 'worker_holds_leases').
   */
  deleteWorker(workerId: string, audit: AuditEntry): Promise<WorkerRecord>;
}
export const WORKER_SESSION_REPOSITORY = Symbol('WorkerSessionRepository');

export const API_KEY_ROLES = ['viewer', 'admin'] as const;
export type ApiKeyRole = (typeof API_KEY_ROLES)[number];

export interface ApiKeyRecord {
  readonly id: string;
  readonly name: string;
  readonly role: ApiKeyRole;
  readonly createdAt: number;
  readonly revokedAt: number | null;
}

/** API keys are stored only as SHA-256 digests (R-ID-5). */
export interface ApiKeyRepository {
  create(
    key: { id: string; name: string; role: ApiKeyRole; digest: string },
    audit: AuditEntry,
  ): Promise<ApiKeyRecord>;
  findActiveByDigest(digest: string): Promise<ApiKeyRecord | null>;
  list(): Promise<ApiKeyRecord[]>;
  revoke(id: string, audit: AuditEntry): Promise<ApiKeyRecord>;
}
export const API_KEY_REPOSITORY = Symbol('ApiKeyRepository');

export interface AuditEntry {
  readonly actor: string;
  readonly action: string;
  readonly target: string;
  readonly detail?: Record<string, unknown>;
}

/** Every admin mutation is recorded (who, what, when), in the mutation's own transaction. */
export interface AuditRepository {
  list(limit: number): Promise<(AuditEntry & { id: string; at: number })[]>;
}
export const AUDIT_REPOSITORY = Symbol('AuditRepository');

export interface RevokedCertificate {
  readonly fingerprint: string;
  readonly revokedAt: number;
  readonly reason: string | null;
}

/** Worker certificates refused by fingerprint, whatever worker they name (R-ID-4). */
export interface CertificateRevocationRepository {
  /** Idempotent: revoking twice keeps the first time; the audit entry commits with it. */
  revoke(fingerprint: string, reason: string | null, audit: AuditEntry): Promise<RevokedCertificate>;
  /** Whether this certificate is revoked, and revokedCount, read in one snapshot. */
  lookUp(fingerprint: string): Promise<{ readonly revoked: boolean; readonly revokedCount: number }>;
  /**
   * How many certificates are revoked. A revocation is never withdrawn or deleted, so the set only
   * grows: an unchanged count is an unchanged set (the revocation cache relies on it, ADR 0022).
   */
  revokedCount(): Promise<number>;
  list(limit: number): Promise<RevokedCertificate[]>;
}
export const CERTIFICATE_REVOCATION_REPOSITORY = Symbol('CertificateRevocationRepository');
