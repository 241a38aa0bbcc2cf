import { ChildProcess, spawn } from 'node:child_process';
import { EventEmitter } from 'node:events';

/**
 * Reads `+pgid` / `-pgid` lines; at the end of its input it SIGKILLs every group still listed. The
 * input ends when the worker closes it (no run left) or when the worker dies, however it dies: the
 * kernel closes the pipe of a killed process.
 */
const REAPER_SCRIPT = `groups=""
while IFS= read -r line; do
  case "$line" in
    +*) groups="$groups \${line#+}" ;;
    -*) keep=""; for g in $groups; do [ "$g" = "\${line#-}" ] || keep="$keep $g"; done; groups=$keep ;;
  esac
done
for g in $groups; do kill -KILL "-$g" 2>/dev/null; done`;

/**
 * Run groups must not outlive a worker that died without killing them (kill -9, the OOM killer):
 * their lease would expire, the attempt be retried elsewhere, and the orphan still run beside it.
 * A small `sh` beside the worker, in a group of its own (terminal signals do not reach it), holds
 * the list of live run groups and kills them when its input ends. It lives while the worker has a
 * run and `lingerMs` after the last one ends (the next run reuses it: no `sh` spawned per run); then
 * it is released, so an idle worker holds no child process (R-PROF-3). `lingerMs` 0 releases it as
 * soon as the last group is untracked. Emits `released` (with the reaper's pid) when it lets one go.
 */
export class GroupReaper extends EventEmitter<{ released: [pid: number | undefined] }> {
  private child: ChildProcess | undefined;
  private readonly groups = new Set<number>();
  private lingerTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly shell: string = '/bin/sh',
    private readonly lingerMs = 0,
  ) {
    super();
  }

  /** The process that would reap, while any group is tracked (tests). */
  get pid(): number | undefined {
    return this.child?.pid;
  }

  track(pgid: number): void {
    this.stopLinger();
    if (this.groups.has(pgid)) return;
    this.groups.add(pgid);
    this.send(`+${pgid}`);
  }

  /** The group is gone (or given up on): no longer killed at the worker's death. */
  untrack(pgid: number): void {
    if (!this.groups.delete(pgid)) return;
    this.send(`-${pgid}`);
    if (this.groups.size > 0) return;
    if (this.lingerMs === 0) return this.release();
    this.stopLinger();
    this.lingerTimer = setTimeout(() => this.release(), this.lingerMs);
    this.lingerTimer.unref();
  }

  /** Ends the reaper: it kills what is still listed (nothing, on an orderly stop) and exits. */
  release(): void {
    this.stopLinger();
    const child = this.child;
    this.child = undefined;
    this.groups.clear();
    child?.stdin?.end();
    if (child) this.emit('released', child.pid);
  }

  private stopLinger(): void {
    clearTimeout(this.lingerTimer);
    this.lingerTimer = undefined;
  }

  private send(line: string): void {
    this.child ??= this.start();
    this.child.stdin?.write(`${line}\n`);
  }

  private start(): ChildProcess {
    const child = spawn(this.shell, ['-c', REAPER_SCRIPT], {
      stdio: ['pipe', 'ignore', 'ignore'],
      detached: true,
    });
    // A reaper that could not start (or died) leaves the worker as it was before reapers; never fatal.
    child.on('error', () => undefined);
    child.stdin?.on('error', () => undefined);
    child.unref();
    return child;
  }
}
