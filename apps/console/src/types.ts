/** The parts of the admin API's answers the console shows (docs/openapi.json has them whole). */

export interface Worker {
  workerId: string;
  disabled: boolean;
  status: 'online' | 'draining' | 'expired' | 'offline' | 'disabled';
  sessionId: string | null;
  maxConcurrentRuns: number | null;
  availableSlots: number | null;
  softwareVersion: string | null;
  protocolVersion?: number | null;
  wireVersion?: number | null;
  capabilities: {
    labels?: Record<string, string> | null;
    runtimes?: { name: string; version?: string }[];
  } | null;
  lastSeenAt: string | null;
  registeredAt: string | null;
  certificateIssuedAt?: string | null;
  certificateNotAfter?: string | null;
}
export interface WorkerDetail extends Worker {
  activeRuns?: { runId: string; attemptId: string; leaseExpiresAt: string }[];
}
export interface TaskSpec {
  name: string;
  command: string;
  runtime: string;
  timeoutMs?: number;
  cron?: string | null;
  timezone?: string | null;
  env?: Record<string, string> | null;
  priority?: number;
  placement?: {
    required?: { labels?: Record<string, string> | null; [key: string]: unknown } | null;
    preferred?: { key: string; value: string; weight: number }[] | null;
  } | null;
  retry?: {
    maxAttempts: number;
    initialBackoffMs: number;
    multiplier?: number;
    maxBackoffMs?: number;
  } | null;
  bundle?: { digest: string; workdir: string } | null;
  secretEnv?: Record<string, string> | null;
  [key: string]: unknown;
}
export interface Bundle {
  digest: string;
  sizeBytes: number;
  createdAt: string;
}
export interface Secret {
  name: string;
}
export interface Task {
  id: string;
  name: string;
  revision: number;
  spec: TaskSpec;
  createdAt: string;
  updatedAt: string;
}
export interface Revision {
  revision: number;
  digest: string;
  spec: TaskSpec;
  createdAt: string;
}
export interface Run {
  id: string;
  taskId: string;
  /** The task's name (list and detail answers). */
  taskName?: string | null;
  revision: number;
  status: string;
  trigger: string;
  attemptCount: number;
  cancelRequested: boolean;
  createdAt: string;
  updatedAt: string;
  finishedAt: string | null;
}
export interface Attempt {
  id: string;
  attemptNo: number;
  status: string;
  workerId: string | null;
  exitCode: number | null;
  errorCode?: string | null;
  errorSummary?: string | null;
  createdAt: string;
  finishedAt: string | null;
}
export interface RunEvent {
  seq: number;
  type: string;
  attemptId: string | null;
  at: string;
  detail: Record<string, unknown> | null;
}
export interface RunDetail extends Run {
  attempts: Attempt[];
  events: RunEvent[];
  pending?: {
    considered: number;
    matching: number;
    reasons: Record<string, number>;
    missingLabels?: Record<string, number>;
    computedAt: string;
  } | null;
  placement?: { pending?: RunDetail['pending'] } | null;
  envVars?: { name: string; version: number; secret: boolean }[];
}
export interface LogEntry {
  position: number;
  attemptId: string;
  kind: string;
  stream: string;
  text: string;
  at: string;
}
export interface LogPage {
  items: LogEntry[];
  nextAfter: number;
  runEnded: boolean;
  truncated: boolean;
}
export interface Page<T> {
  items: T[];
  nextAfter?: string | null;
  nextBefore?: string | null;
}
export interface AuditEntry {
  id: string;
  at: string;
  actor: string;
  action: string;
  target: string;
  detail?: Record<string, unknown>;
}

/** A global env var (ADR 0061): a secret one's value is never answered (null). */
export interface EnvVar {
  readonly name: string;
  readonly secret: boolean;
  readonly value: string | null;
  readonly remark: string;
  readonly enabled: boolean;
  readonly position: number;
  readonly version: number;
  readonly createdAt: string;
  readonly updatedAt: string;
}

export interface EnvImportReport {
  readonly applied: boolean;
  readonly create: string[];
  readonly update: string[];
  readonly unchanged: string[];
  readonly refused: { at: string; reason: string }[];
  readonly skipped: { at: string; reason: string }[];
}

/** A task as the list answers it (issue 31 item 3). */
export interface TaskListItem extends Task {
  readonly enabled: boolean;
  readonly pinned: boolean;
  readonly lastRun: { id: string; status: string } | null;
  readonly nextFireAt: string | null;
}
