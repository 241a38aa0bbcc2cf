import type { TaskRuntime } from '@ql/domain';
import { ChildProcess, spawn } from 'node:child_process';
import { chmod, chown, mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { CompletionStatus, RecordedProcess } from '../journal/journal-record';
import { currentBootId, groupAlive, signalGroup, waitGroupGone } from '../host/process-table';
import { GroupReaper } from './group-reaper';
import { OutputChunk, OutputLimiter } from './output-limiter';

/** Every process a run starts carries this variable: how a restarted worker recognises its leftovers. */
export const ATTEMPT_MARKER = 'QL_ATTEMPT_ID';
/** The child's PATH when the worker has none. */
const FALLBACK_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

export interface LocalProcessExecutorOptions {
  /** Per-run work folders are made under it (0700). */
  readonly workRoot: string;
  /** SIGTERM → SIGKILL grace for the run's process group. */
  readonly killGraceMs: number;
  /** Output kept per run (both streams); beyond it a marker and nothing more. */
  readonly outputCapBytes: number;
  readonly chunkBytes?: number;
  /** PATH given to runs; the worker's own PATH by default. */
  readonly path?: string;
  /** How long the reaper `sh` outlives the last run, for the next one to reuse (0: not at all). */
  readonly reaperLingerMs?: number;
  /** The user runs start as (QL_WORKER_RUN_AS, checked at start); unset: the worker's own. */
  readonly runAs?: { readonly uid: number; readonly gid: number };
}

export interface LaunchRequest {
  /** The lease's offer id: names the run's fresh work folder. */
  readonly offerId: string;
  readonly attemptId: string;
  readonly runtime: TaskRuntime;
  readonly command: string;
  /** The pinned env of the revision; the only task-given variables the child sees. */
  readonly env: Readonly<Record<string, string>>;
  readonly timeoutMs: number;
  readonly onOutput?: (chunk: OutputChunk) => void;
}

export interface ProcessOutcome {
  readonly status: CompletionStatus;
  readonly exitCode: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly outputBytes: number;
  readonly droppedBytes: number;
  /** False only if a member of the group survived SIGKILL (e.g. stuck in the kernel). */
  readonly groupCleared: boolean;
}

/** The run could not start: no process exists for it. */
export class StartFailedError extends Error {
  override readonly name = 'StartFailedError';
  constructor(
    readonly code: 'runtime_unavailable' | 'work_dir_exists' | 'spawn_failed',
    message: string,
  ) {
    super(message);
  }
}

/** How each runtime runs the pinned command (ADR 0008): shell inline, node and python from a script file. */
function commandLine(runtime: TaskRuntime, command: string, workDir: string) {
  switch (runtime) {
    case 'shell':
      return { file: '/bin/sh', args: ['-c', command], script: null };
    case 'node':
      return { file: process.execPath, args: ['task.js'], script: join(workDir, 'task.js') };
    case 'python':
      return { file: 'python3', args: ['task.py'], script: join(workDir, 'task.py') };
  }
}

/**
 * The `local-process` executor (R-WRK-3): each run in its own process group (detached), a fresh
 * 0700 work folder, the pinned env over a minimal base, output in bounded chunks, a deadline, and
 * the exact group killed on timeout, cancel, or leftovers after the command exits. The constructor
 * creates nothing.
 */
export class LocalProcessExecutor {
  /** Kills the run groups if the worker dies without doing it; started with the first run. */
  private readonly reaper: GroupReaper;

  constructor(
    private readonly options: LocalProcessExecutorOptions,
    reaper?: GroupReaper,
  ) {
    this.reaper = reaper ?? new GroupReaper(undefined, options.reaperLingerMs);
  }

  /** Resolves once the process exists (its pid and group known); rejects with StartFailedError. */
  async launch(request: LaunchRequest): Promise<LocalRun> {
    if (!UUID.test(request.offerId)) throw new RangeError('offerId must be a uuid');
    const { runAs } = this.options;
    // Another run user must pass through the root (0711) to its own folder; it cannot list the root.
    await mkdir(this.options.workRoot, { recursive: true, mode: runAs ? 0o711 : 0o700 });
    if (runAs) await chmod(this.options.workRoot, 0o711);
    const workDir = join(this.options.workRoot, request.offerId);
    try {
      await mkdir(workDir, { mode: 0o700 });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      throw new StartFailedError(
        'work_dir_exists',
        `work folder ${workDir} exists: this run was launched before`,
      );
    }
    const line = commandLine(request.runtime, request.command, workDir);
    if (line.script) await writeFile(line.script, request.command, { mode: 0o600 });
    if (runAs) {
      // The script and the folder become the run user's (CAP_CHOWN). The folder keeps the worker's
      // group with search only (0710): spawn enters it before dropping to the run user, and a root
      // worker without CAP_DAC_OVERRIDE could not otherwise. chmod while still its owner.
      await chmod(workDir, 0o710);
      if (line.script) await chown(line.script, runAs.uid, runAs.gid);
      await chown(workDir, runAs.uid, process.getgid!());
    }
    const env = {
      PATH: this.options.path ?? process.env.PATH ?? FALLBACK_PATH,
      HOME: workDir,
      LANG: 'C.UTF-8',
      ...request.env,
      [ATTEMPT_MARKER]: request.attemptId,
    };
    const child = spawn(line.file, line.args, {
      cwd: workDir,
      env,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
      // libuv drops the supplementary groups, then sets the gid and uid in the child before exec.
      ...(runAs && { uid: runAs.uid, gid: runAs.gid }),
    });
    await new Promise<void>((resolve, reject) => {
      child.once('spawn', resolve);
      child.once('error', (error: NodeJS.ErrnoException) =>
        reject(
          error.code === 'ENOENT'
            ? new StartFailedError(
                'runtime_unavailable',
                `${line.file} is not installed on this worker (${error.message})`,
              )
            : new StartFailedError('spawn_failed', error.message),
        ),
      );
    });
    const run = new LocalRun(child, workDir, request, this.options);
    this.reaper.track(run.pgid);
    const untrack = () => this.reaper.untrack(run.pgid);
    run.done.then(untrack, untrack);
    return run;
  }
}

/** One launched run: its process group, its outcome, and `cancel()`. */
export class LocalRun {
  readonly pid: number;
  /** `detached: true` makes the child a session and group leader: its pid is the group id. */
  readonly pgid: number;
  readonly done: Promise<ProcessOutcome>;
  private reason: 'timed_out' | 'cancelled' | null = null;
  private terminating = false;
  private exited = false;
  private readonly timers: NodeJS.Timeout[] = [];

  constructor(
    child: ChildProcess,
    readonly workDir: string,
    request: LaunchRequest,
    private readonly options: LocalProcessExecutorOptions,
  ) {
    this.pid = child.pid!;
    this.pgid = this.pid;
    const output = new OutputLimiter(
      options.outputCapBytes,
      options.chunkBytes ?? 16 * 1024,
      request.onOutput ?? (() => undefined),
    );
    child.stdout!.on('data', (data: Buffer) => output.push('stdout', data));
    child.stderr!.on('data', (data: Buffer) => output.push('stderr', data));
    this.arm(() => this.terminate('timed_out'), request.timeoutMs);
    const exited = new Promise<[number | null, NodeJS.Signals | null]>((resolve) =>
      child.once('exit', (code, signal) => {
        this.exited = true;
        // The command is over; whatever it left running in its group goes too.
        if (groupAlive(this.pgid)) this.terminate(null);
        resolve([code, signal]);
      }),
    );
    const closed = new Promise((resolve) => child.once('close', resolve));
    this.done = Promise.all([exited, closed]).then(async ([[code, signal]]) => {
      const groupCleared = await waitGroupGone(this.pgid, options.killGraceMs + 2000);
      for (const t of this.timers) clearTimeout(t);
      return {
        status: this.reason ?? (code === 0 ? 'succeeded' : 'failed'),
        exitCode: code,
        signal,
        outputBytes: output.bytes,
        droppedBytes: output.droppedBytes,
        groupCleared,
      };
    });
  }

  /** What the journal records to find this group again after a crash. */
  get process(): RecordedProcess {
    return { pid: this.pid, pgid: this.pgid, bootId: currentBootId() };
  }

  /** Kills the run's whole group: SIGTERM, then SIGKILL after the grace; the outcome is `cancelled`. */
  cancel(): void {
    this.terminate('cancelled');
  }

  private terminate(reason: 'timed_out' | 'cancelled' | null): void {
    if (!this.exited) this.reason ??= reason; // a cancel after the command ended changes no outcome
    if (this.terminating) return;
    this.terminating = true;
    signalGroup(this.pgid, 'SIGTERM');
    this.arm(() => signalGroup(this.pgid, 'SIGKILL'), this.options.killGraceMs);
  }

  private arm(fn: () => void, ms: number): void {
    const timer = setTimeout(fn, ms);
    timer.unref();
    this.timers.push(timer);
  }
}
