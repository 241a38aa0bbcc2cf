// Size: the one harness every remote-run e2e file shares: plane, worker processes, admin views and waits.
/**
 * Remote runs end to end: a real control plane (real TLS, a real database per dialect) and real
 * worker processes that pull, execute and report, driven and observed the way a user does — through
 * the admin API — plus what only the host can tell (which processes of an attempt are still alive).
 *
 *   const h = await RemoteRunHarness.start('sqlite', ['worker-a']);
 *   const w = h.startWorker('worker-a');
 *   const runId = await h.trigger(await h.createTask({ command: 'echo hi', runtime: 'shell' }));
 *   const run = await h.untilRunEnds(runId);
 *   await h.close();
 *
 * Every wait polls a condition with a deadline (`eventually`); on a timeout the transcripts of the
 * workers it started are in the error.
 */
import { readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { WORKER_SETTINGS } from '../../apps/worker/src/config/worker-config';
import { readJournalLog } from '../../apps/worker/src/journal/journal-log';
import type { JournalRecord } from '../../apps/worker/src/journal/journal-record';
import { ATTEMPT_MARKER } from '../../apps/worker/src/executor/local-process.executor';
import { environHas } from '../../apps/worker/src/host/process-table';
import { EntryPoint, WORKER, tempDir } from './entry-points';
import {
  Dialect,
  TestDatabase,
  TestPlane,
  createTestDatabase,
  createTestPki,
  startTestPlane,
} from './test-plane';

export interface AttemptView {
  id: string;
  attemptNo: number;
  status: string;
  workerId: string | null;
  finishedAt: string | null;
  /** Why it ended, as its worker or the control plane said (issue 29 item 4). */
  errorCode: string | null;
  errorSummary: string | null;
}
export interface RunEventView {
  seq: number;
  type: string;
  attemptId: string | null;
  at: string;
  detail: Record<string, string | number | boolean | null> | null;
}
export interface RunView {
  id: string;
  status: string;
  attemptCount: number;
  cancelRequested: boolean;
  attempts: AttemptView[];
  events: RunEventView[];
}
export interface LogItem {
  position: number;
  attemptId: string;
  seq: number;
  kind: string;
  /** `stdout`, `stderr`, `system` (a truncation marker) or `unknown` (stored without one), ADR 0032. */
  stream: string;
  text: string;
}
export interface WorkerView {
  workerId: string;
  status: string;
  sessionId: string;
  generation: number;
  version: number;
  leaseExpiresAt: string;
}

export const TERMINAL_RUN_STATUSES = ['succeeded', 'failed', 'cancelled', 'timed_out', 'lost'];

/** Short leases and a running sweeper: expiry, retries and deadlines happen within seconds. */
export const FAST_PLANE_ENV: Readonly<Record<string, string>> = {
  QL_SESSION_LEASE_MS: '5000',
  QL_RUN_LEASE_MS: '5000',
  QL_SWEEP_INTERVAL_MS: '200',
  QL_INGRESS_RATE_BURST: '100000',
  QL_INGRESS_RATE_PER_SECOND: '100000',
};

/** The workers' per-call deadline (a timer while a call is in flight). */
export const WORKER_REQUEST_TIMEOUT_MS = 2_000;

/** Settings a test wants when the worker knows them (a setting a worker does not know refuses its start). */
const OPTIONAL_WORKER_ENV: Readonly<Record<string, string>> = { QL_WORKER_PULL_INTERVAL_MS: '100' };
const KNOWN_WORKER_ENV = new Set<string>(WORKER_SETTINGS.map((s) => s.env));

/** The optional settings this worker build knows (fast idle pulls). */
export function optionalWorkerEnv(): Record<string, string> {
  return Object.fromEntries(
    Object.entries(OPTIONAL_WORKER_ENV).filter(([name]) => KNOWN_WORKER_ENV.has(name)),
  );
}

/**
 * The default deadline of a wait: generous, because a worker process start or a python start takes
 * seconds on a loaded machine; a wait that passes returns as soon as its condition holds.
 */
export const WAIT_DEADLINE_MS = 60_000;

/** Polls `probe` until it returns a value; fails at the deadline naming what it waited for. */
export async function eventually<T>(
  what: string,
  probe: () => Promise<T | undefined> | T | undefined,
  {
    deadlineMs = WAIT_DEADLINE_MS,
    pollMs = 100,
    context,
  }: { deadlineMs?: number; pollMs?: number; context?: () => string } = {},
): Promise<T> {
  const deadline = Date.now() + deadlineMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() >= deadline)
      throw new Error(`timed out after ${deadlineMs} ms waiting for ${what}\n${context?.() ?? ''}`);
    await delay(pollMs);
  }
}

/** `promise`, or a failure naming `what` after `ms` (where a bound is the point of the test). */
export async function within<T>(what: string, ms: number, promise: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * The live processes (zombies have no environment) that carry `QL_ATTEMPT_ID=<attemptId>`: every
 * process a run starts inherits it, so none may be left once the attempt ended.
 */
export function attemptProcesses(attemptId: string): number[] {
  return readdirSync('/proc')
    .filter((name) => /^\d+$/.test(name))
    .map(Number)
    .filter((pid) => pid !== process.pid && environHas(pid, ATTEMPT_MARKER, attemptId));
}

/** A real worker process with its own journal and work folders (kept across a restart if given). */
export class RunWorker extends EntryPoint {
  constructor(
    readonly workerId: string,
    readonly journalDir: string,
    readonly workDir: string,
    env: Record<string, string>,
    launcher: readonly string[] = [],
  ) {
    super(WORKER, { ...env, QL_WORKER_JOURNAL_DIR: journalDir, QL_WORKER_WORK_DIR: workDir }, [], launcher);
  }

  /** The session id of its `worker registered` line, once it logged one. */
  session(): string | undefined {
    return this.lines.find((l) => l.msg === 'worker registered')?.sessionId as string | undefined;
  }

  /** The last lines it wrote (stdout and stderr) but its routine heartbeat lines, for failure messages. */
  tail(lines = 40): string {
    const told = [
      ...this.lines.filter((l) => l.msg !== 'heartbeat').map((l) => JSON.stringify(l)),
      ...this.stderr,
    ];
    return `--- ${this.workerId} (running: ${this.running}) ---\n${told.slice(-lines).join('\n')}`;
  }
}

type HarnessPki = Awaited<ReturnType<typeof createTestPki>>;

export class RemoteRunHarness {
  private readonly workers: RunWorker[] = [];
  private readonly root = tempDir('ql-remote-runs-');
  private names = 0;

  private constructor(
    readonly t: TestPlane,
    private readonly db: TestDatabase,
    readonly pki: Awaited<ReturnType<typeof createTestPki>>,
  ) {}

  static async start(
    dialect: Dialect,
    workerIds: string[],
    planeEnv: Record<string, string> | ((pki: HarnessPki) => Record<string, string>) = {},
    planeOptions: Parameters<typeof startTestPlane>[3] = {},
  ): Promise<RemoteRunHarness> {
    const db = await createTestDatabase(dialect);
    const pki = await createTestPki(workerIds);
    const env = typeof planeEnv === 'function' ? planeEnv(pki) : planeEnv;
    const t = await startTestPlane(db, pki, { ...FAST_PLANE_ENV, ...env }, planeOptions);
    return new RemoteRunHarness(t, db, pki);
  }

  /** The database the control plane uses (`sqlite:<file>` or a PostgreSQL URL): read-only inspection. */
  get databaseUrl(): string {
    return this.db.url;
  }

  /** A folder under this harness's temp root (removed by `close`). */
  folder(name: string): string {
    return join(this.root, name);
  }

  /**
   * Starts the worker entry point as `workerId`. `journalDir` defaults to a fresh folder; pass an
   * old worker's (and its `workDir`) to restart it "on the same machine". `launcher` runs it through a command that
   * execs it in place (e.g. `setpriv` with a reduced capability bounding set).
   */
  startWorker(
    workerId: string,
    options: {
      env?: Record<string, string>;
      journalDir?: string;
      workDir?: string;
      launcher?: readonly string[];
    } = {},
  ): RunWorker {
    const n = this.workers.length + 1;
    const w = new RunWorker(
      workerId,
      options.journalDir ?? this.folder(`${workerId}-${n}-journal`),
      options.workDir ?? this.folder(`${workerId}-${n}-runs`),
      this.workerEnv(workerId, options.env),
      options.launcher,
    );
    this.workers.push(w);
    return w;
  }

  /**
   * The worker's `journal …` command (ADR 0029) on `journalDir`, with the environment a worker of
   * `workerId` gets; resolves once it exited, with its exit code and output lines.
   */
  async journalCommand(
    workerId: string,
    journalDir: string,
    args: readonly string[],
  ): Promise<{ code: number | null; stdout: string[]; stderr: string[] }> {
    const env = { ...this.workerEnv(workerId), QL_WORKER_JOURNAL_DIR: journalDir };
    const command = new EntryPoint(WORKER, env, ['journal', ...args]);
    const { code } = await command.exited;
    const stdout = command.lines.map((l) => String(l.msg).replace(/^\(not JSON\) /, ''));
    return { code, stdout, stderr: command.stderr };
  }

  private workerEnv(workerId: string, env: Record<string, string> = {}): Record<string, string> {
    return {
      QL_PROFILE: 'worker',
      QL_WORKER_ID: workerId,
      QL_WORKER_CONTROL_PLANE_URL: this.t.plane.ingressUrl,
      QL_WORKER_TLS_CA: this.pki.caCertPath,
      // A worker the PKI has no certificate for enrolls: the test gives its files and token.
      ...(this.pki.workers[workerId]
        ? {
            QL_WORKER_TLS_CERT: this.pki.workers[workerId].certPath,
            QL_WORKER_TLS_KEY: this.pki.workers[workerId].keyPath,
          }
        : {}),
      QL_WORKER_HEARTBEAT_MS: '200',
      QL_WORKER_REQUEST_TIMEOUT_MS: String(WORKER_REQUEST_TIMEOUT_MS),
      QL_WORKER_KILL_GRACE_MS: '500',
      QL_WORKER_LOG_LEVEL: 'debug',
      ...optionalWorkerEnv(),
      ...env,
    };
  }

  /** Waits until `w` registered and its session is online in the admin API. */
  async untilOnline(w: RunWorker): Promise<WorkerView> {
    return w.until(
      `${w.workerId} online`,
      async () => {
        const view = await this.worker(w.workerId);
        return view?.status === 'online' && view.sessionId === w.session() ? view : undefined;
      },
      { pollMs: 100, deadlineMs: WAIT_DEADLINE_MS },
    );
  }

  async worker(workerId: string): Promise<WorkerView | undefined> {
    const res = await this.t.admin('GET', `/api/v1/workers/${workerId}`);
    return res.status === 200 ? (res.body as WorkerView) : undefined;
  }

  /** Creates a task (a unique name is added) and returns its id. */
  async createTask(spec: Record<string, unknown>): Promise<string> {
    const res = await this.t.admin('POST', '/api/v1/tasks', { name: `remote run ${++this.names}`, ...spec });
    if (res.status !== 201) throw new Error(`task not created: ${res.status} ${res.raw}`);
    return (res.body as { id: string }).id;
  }

  async trigger(taskId: string): Promise<string> {
    const res = await this.t.admin('POST', `/api/v1/tasks/${taskId}/runs`, {});
    if (res.status !== 201) throw new Error(`run not triggered: ${res.status} ${res.raw}`);
    return (res.body as { run: { id: string } }).run.id;
  }

  async run(runId: string): Promise<RunView> {
    const res = await this.t.admin('GET', `/api/v1/runs/${runId}`);
    if (res.status !== 200) throw new Error(`run ${runId}: ${res.status} ${res.raw}`);
    return res.body as RunView;
  }

  /** Polls the run until `condition` holds (or the deadline; the workers' transcripts are in the error). */
  untilRun(
    runId: string,
    what: string,
    condition: (run: RunView) => boolean,
    deadlineMs = WAIT_DEADLINE_MS,
  ): Promise<RunView> {
    let last: RunView | undefined;
    return eventually(
      `run ${runId}: ${what}`,
      async () => {
        last = await this.run(runId);
        return condition(last) ? last : undefined;
      },
      {
        deadlineMs,
        context: () => {
          const seen = last && {
            status: last.status,
            attempts: last.attempts,
            events: last.events.map((e) => e.type),
          };
          return `last seen: ${JSON.stringify(seen)}\n${this.transcripts()}`;
        },
      },
    );
  }

  untilRunEnds(runId: string, deadlineMs = WAIT_DEADLINE_MS): Promise<RunView> {
    return this.untilRun(
      runId,
      'a terminal status',
      (r) => TERMINAL_RUN_STATUSES.includes(r.status),
      deadlineMs,
    );
  }

  /** Every stored log entry of the run, paged with `after=nextAfter` like a client. */
  async logs(runId: string): Promise<{ items: LogItem[]; truncated: boolean; runEnded: boolean }> {
    const items: LogItem[] = [];
    let after = 0;
    for (;;) {
      const res = await this.t.admin('GET', `/api/v1/runs/${runId}/logs?after=${after}&limit=100`);
      if (res.status !== 200) throw new Error(`logs of ${runId}: ${res.status} ${res.raw}`);
      const page = res.body as { items: LogItem[]; nextAfter: number; truncated: boolean; runEnded: boolean };
      items.push(...page.items);
      if (page.items.length === 0) return { items, truncated: page.truncated, runEnded: page.runEnded };
      after = page.nextAfter;
    }
  }

  /** The run's output as one text (output entries only, in position order; of one stream if given). */
  async output(runId: string, stream?: string): Promise<string> {
    const { items } = await this.logs(runId);
    return items
      .filter((i) => i.kind !== 'truncated' && (stream === undefined || i.stream === stream))
      .map((i) => i.text)
      .join('');
  }

  transcripts(): string {
    return this.workers.map((w) => w.tail()).join('\n');
  }

  /** SIGKILLs the workers still running (and waits for them), nothing else. */
  async stopWorkers(): Promise<void> {
    for (const w of this.workers.filter((x) => x.running)) {
      w.kill('SIGKILL');
      await w.exited;
    }
  }

  async close(): Promise<void> {
    await this.stopWorkers();
    await this.t.close();
    await this.db.dispose();
    this.pki.remove();
    rmSync(this.root, { recursive: true, force: true });
  }
}

/** The records a worker's journal holds now, read from its log without the lock; none before it exists. */
export function journalRecords(dir: string): JournalRecord[] {
  return readJournalLog(dir);
}

/** The `attempt.finished` event of an attempt: its detail holds the reported status and exit code. */
export function finishedEvent(run: RunView, attemptId: string): RunEventView | undefined {
  return run.events.find((e) => e.type === 'attempt.finished' && e.attemptId === attemptId);
}
