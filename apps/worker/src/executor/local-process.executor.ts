import type { TaskRuntime } from '@ql/domain';
import { ChildProcess, spawn } from 'node:child_process';
import { chmod, chown, lchown, lstat, mkdir, readdir, realpath, writeFile } from 'node:fs/promises';
import { join, sep } from 'node:path';
import { AttemptCgroup, CgroupChoice, CgroupSetting, CgroupUsage, chooseRunCgroups } from '../host/cgroup';
import { containedLine, moveIntoCgroup } from './cgroup-launch';
import { StartFailedError } from './start-failed-error';
import type { CompletionStatus, RecordedProcess } from '../journal/journal-record';
import { currentBootId, groupAlive, signalGroup, waitGroupGone } from '../host/process-table';
import { monotonicNow } from '../host/monotonic';
import { copyTree } from '../bundles/copy-tree';
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
  /** Each attempt in a cgroup of its own (ADR 0030), decided at the first `containment()`; default `off`. */
  readonly cgroup?: CgroupSetting;
  /** This worker's folder under the runs folder (`workerCgroupFolder`); default: one for this process. */
  readonly cgroupFolder?: string;
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
  /**
   * ADR 0051: the unpacked bundle (the cache's folder) and the folder inside it the command runs in.
   * The bundle is copied into the attempt's work folder (`bundle/`) first: what a run writes there
   * never reaches the cache or the next run. `copyTo` makes that copy (the cache's spare copy, issue
   * 19); without it the folder is copied here.
   */
  readonly bundle?: {
    readonly dir: string;
    readonly workdir: string;
    readonly copyTo?: (dest: string) => Promise<void>;
  };
}

export interface ProcessOutcome {
  readonly status: CompletionStatus;
  readonly exitCode: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly outputBytes: number;
  readonly droppedBytes: number;
  /** False only if a member of the group survived SIGKILL (e.g. stuck in the kernel). */
  readonly groupCleared: boolean;
  /** CPU and peak memory of the attempt's cgroup, when it ran in one. */
  readonly usage?: CgroupUsage;
}

/**
 * How each runtime runs the pinned command (ADR 0008): shell inline, node and python from a script
 * file. Without a bundle the script is the work folder's `task.js`; in a bundle it is written into the
 * working folder itself (issue 29 item 1), so `require('./lib/x')` and `import helper` find the bundle's
 * own modules next to it, and it is named relative to the folder the command starts in.
 */
function commandLine(runtime: TaskRuntime, command: string, scriptDir: string, scriptName: string) {
  switch (runtime) {
    case 'shell':
      return { file: '/bin/sh', args: ['-c', command], script: null };
    case 'node': {
      const name = `${scriptName}.js`;
      return { file: process.execPath, args: [name], script: join(scriptDir, name) };
    }
    case 'python': {
      const name = `${scriptName}.py`;
      return { file: 'python3', args: [name], script: join(scriptDir, name) };
    }
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
  private choice: CgroupChoice | undefined;

  constructor(
    private readonly options: LocalProcessExecutorOptions,
    reaper?: GroupReaper,
  ) {
    this.reaper = reaper ?? new GroupReaper(undefined, options.reaperLingerMs);
  }

  /** How runs are contained, decided once (the worker says it at start; a launch decides it otherwise). */
  containment(): CgroupChoice {
    this.choice ??= chooseRunCgroups(
      this.options.cgroup ?? 'off',
      this.options.cgroupFolder ?? `process-${process.pid}`,
    );
    return this.choice;
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
    const cwd = request.bundle ? await copyBundle(request.bundle, workDir) : workDir;
    // A bundle's own file never has this name: it carries the attempt's id.
    const scriptName = request.bundle ? `.ql-task-${request.attemptId}` : 'task';
    const line = commandLine(request.runtime, request.command, cwd, scriptName);
    if (line.script) await writeFile(line.script, request.command, { mode: 0o600, flag: 'wx' });
    if (runAs) {
      if (request.bundle) await chownTree(join(workDir, BUNDLE_FOLDER), runAs.uid, runAs.gid);
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
    const choice = this.containment();
    const contained =
      choice.kind === 'cgroup' ? containedLine(choice.cgroups, request.attemptId, line, env.PATH) : null;
    const spawned = contained ?? { ...line, stdio: [] };
    const child = spawn(spawned.file, spawned.args, {
      cwd,
      env,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe', ...spawned.stdio],
      // libuv drops the supplementary groups, then sets the gid and uid in the child before exec.
      ...(runAs && { uid: runAs.uid, gid: runAs.gid }),
    });
    await new Promise<void>((resolve, reject) => {
      child.once('spawn', resolve);
      child.once('error', () => contained?.cgroup.remove());
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
    if (contained) moveIntoCgroup(child, contained.cgroup);
    const run = new LocalRun(child, workDir, request, this.options, contained?.cgroup, (pgid, atMs) =>
      this.reaper.arm(pgid, atMs),
    );
    this.reaper.track(run.pgid, contained?.cgroup.path);
    const untrack = () => this.reaper.untrack(run.pgid);
    run.done.then(untrack, untrack);
    return run;
  }
}

/** The attempt's copy of its bundle, under its work folder. */
export const BUNDLE_FOLDER = 'bundle';

/**
 * ADR 0051: the cached bundle copied into the attempt's own folder (links copied as links, never
 * followed), and the folder the command starts in: `workdir` inside that copy, which must be a folder
 * and, its links followed (realpath), still inside the copy (issue 27 item 5) — the command starts in
 * that real path, so nothing between the check and the start can move it.
 */
async function copyBundle(bundle: NonNullable<LaunchRequest['bundle']>, workDir: string): Promise<string> {
  const copy = join(workDir, BUNDLE_FOLDER);
  await (bundle.copyTo ? bundle.copyTo(copy) : copyTree(bundle.dir, copy));
  const realCopy = await realpath(copy);
  const real = await realpath(bundle.workdir === '.' ? copy : join(copy, bundle.workdir)).catch(() => null);
  if (real !== null && real !== realCopy && !real.startsWith(realCopy + sep))
    throw new StartFailedError(
      'bundle_workdir_outside',
      `the bundle's folder "${bundle.workdir}" leads out of the attempt's copy of the bundle (to ${real})`,
    );
  const stat = real === null ? null : await lstat(real);
  if (!stat?.isDirectory())
    throw new StartFailedError('bundle_workdir_missing', `the bundle has no folder "${bundle.workdir}"`);
  return real!;
}

/** The copy becomes the run user's: its scripts may write where they stand. Links are not followed. */
async function chownTree(path: string, uid: number, gid: number): Promise<void> {
  await lchown(path, uid, gid);
  const stat = await lstat(path);
  if (!stat.isDirectory()) return;
  for (const name of await readdir(path)) await chownTree(join(path, name), uid, gid);
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
  /** Monotonic time every process of the run must be dead by (ADR 0028); none until `stopBy`. */
  private hardStopMs = Infinity;
  /** Monotonic time the SIGKILL is due after a SIGTERM (its grace); none before a kill began. */
  private killAfterGrace = Infinity;
  private killTimer: NodeJS.Timeout | undefined;

  constructor(
    child: ChildProcess,
    readonly workDir: string,
    request: LaunchRequest,
    private readonly options: LocalProcessExecutorOptions,
    private readonly cgroup: AttemptCgroup | null = null,
    /** Arms the reaper's dead man's switch for the group (a process outside this event loop). */
    private readonly armSwitch: (pgid: number, atMs: number) => void = () => undefined,
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
        if (groupAlive(this.pgid) || this.cgroup?.populated()) this.terminate(null);
        resolve([code, signal]);
      }),
    );
    const closed = new Promise((resolve) => child.once('close', resolve));
    this.done = Promise.all([exited, closed]).then(async ([[code, signal]]) => {
      const groupCleared = await waitGroupGone(this.pgid, options.killGraceMs + 2000);
      const contained = await this.cgroup?.release(options.killGraceMs + 2000);
      for (const t of this.timers) clearTimeout(t);
      clearTimeout(this.killTimer);
      return {
        status: this.reason ?? (code === 0 ? 'succeeded' : 'failed'),
        exitCode: code,
        signal,
        outputBytes: output.bytes,
        droppedBytes: output.droppedBytes,
        groupCleared: groupCleared && (contained?.cleared ?? true),
        ...(contained?.usage ? { usage: contained.usage } : {}),
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

  /** The attempt's deadline (the control plane's) comes before the local timeout: `timed_out`. */
  timeOut(): void {
    this.terminate('timed_out');
  }

  /**
   * Every process of the run must be dead by monotonic time `atMs` (the lease term or the deadline,
   * less a margin): the reaper's switch SIGKILLs the group then even if this process is frozen, and
   * a SIGKILL already scheduled by a kill in progress moves up to it. Moved again at every renewal.
   */
  stopBy(atMs: number): void {
    if (this.exited && !groupAlive(this.pgid)) return;
    this.hardStopMs = atMs;
    this.armSwitch(this.pgid, atMs);
    if (this.terminating) this.scheduleKill();
  }

  private terminate(reason: 'timed_out' | 'cancelled' | null): void {
    if (!this.exited) this.reason ??= reason; // a cancel after the command ended changes no outcome
    if (this.terminating) return;
    this.terminating = true;
    this.killAfterGrace = monotonicNow() + this.options.killGraceMs;
    signalGroup(this.pgid, 'SIGTERM');
    this.cgroup?.signal('SIGTERM'); // what left the group (setsid) is still in the cgroup
    this.scheduleKill();
  }

  /** SIGKILL once the grace after SIGTERM passed, or at the hard stop if that comes first. */
  private scheduleKill(): void {
    clearTimeout(this.killTimer);
    const at = Math.min(this.killAfterGrace, this.hardStopMs);
    this.killTimer = setTimeout(
      () => {
        signalGroup(this.pgid, 'SIGKILL');
        this.cgroup?.kill();
      },
      Math.max(0, at - monotonicNow()),
    );
    this.killTimer.unref();
  }

  private arm(fn: () => void, ms: number): void {
    const timer = setTimeout(fn, ms);
    timer.unref();
    this.timers.push(timer);
  }
}
