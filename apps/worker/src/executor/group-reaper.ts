import { ChildProcess, spawn } from 'node:child_process';
import { EventEmitter } from 'node:events';
import { monotonicNow } from '../host/monotonic';

/**
 * Reads `+pgid [cgroup folder]`, `-pgid` and `@pgid seconds` lines; at the end of its input it
 * SIGKILLs every group still listed, and kills its cgroup (`cgroup.kill`: what escaped the group with
 * `setsid` too, ADR 0030) when one was given, then removes that cgroup once empty (5 s at most) and
 * the worker's folder above it once that is empty. The input ends when the worker closes it (no run left) or when the worker dies,
 * however it dies: the kernel closes the pipe of a killed process.
 *
 * `@pgid seconds` is the dead man's switch (ADR 0028): a sleeper (`sleep` in a subshell) SIGKILLs
 * the group when the time passes, unless a later `@` line (the next renewal) or `-pgid` disarms it
 * first. The sleepers are processes of their own: a worker that is stopped (SIGSTOP, Ctrl-Z, a long
 * pause) cannot hold them back. A disarmed sleeper's trap SIGKILLs its `sleep`: a SIGTERM could land
 * in the forked child before it dropped the copied trap and be lost (an orphaned `sleep` lived on),
 * and a TERM before `s` is set is caught after it (`d`). Where `sleep` takes
 * whole seconds only (a minimal busybox), the time is rounded down: the switch fires early, never late.
 */
const REAPER_SCRIPT = `set -f; groups=""
whole=""; sleep 0.001 2>/dev/null || whole=1
killg() { kill -KILL "-$1" 2>/dev/null; eval "c=\\\${c$1:-}"; [ -n "$c" ] && { echo 1 > "$c/cgroup.kill"; } 2>/dev/null; }
rmcg() { i=0; while [ -d "$1" ] && ! rmdir "$1" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.05; i=$((i+1)); done; rmdir "\${1%/*}" 2>/dev/null; }
disarm() { eval "p=\\\${w$1:-}"; [ -n "$p" ] && kill -TERM "$p" 2>/dev/null; eval "w$1="; }
arm() {
  disarm "$1"; t=$2; [ -n "$whole" ] && t=\${t%%.*}
  ( s=; d=; trap 'd=1; [ -n "$s" ] && kill -KILL "$s" 2>/dev/null' TERM
    sleep "$t" & s=$!; [ -n "$d" ] && kill -KILL "$s" 2>/dev/null; wait "$s" && [ -z "$d" ] && killg "$1" ) &
  eval "w$1=$!"
}
while IFS= read -r line; do
  case "$line" in
    +*) set -- \${line#+}; g=$1; shift; groups="$groups $g"; eval "c$g=\\$*" ;;
    -*) disarm "\${line#-}"; keep=""; for g in $groups; do [ "$g" = "\${line#-}" ] || keep="$keep $g"; done; groups=$keep ;;
    @*) set -- \${line#@}; arm "$1" "$2" ;;
  esac
done
for g in $groups; do killg "$g"; disarm "$g"; done
for g in $groups; do eval "c=\\\${c$g:-}"; [ -n "$c" ] && rmcg "$c"; done`;

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

  /** Kills `pgid` (and the processes of `cgroup`, a cgroup v2 folder) if the worker dies. */
  track(pgid: number, cgroup?: string): void {
    this.stopLinger();
    if (this.groups.has(pgid)) return;
    this.groups.add(pgid);
    this.send(cgroup && !/[\n\r]/.test(cgroup) ? `+${pgid} ${cgroup}` : `+${pgid}`);
  }

  /**
   * Arms (or moves) the group's dead man's switch: SIGKILL at monotonic time `atMs` unless armed
   * again or untracked before. Sent at once; the reaper counts the time on its own.
   */
  arm(pgid: number, atMs: number): void {
    if (!this.groups.has(pgid)) return;
    const seconds = Math.max(0, atMs - monotonicNow()) / 1000;
    this.send(`@${pgid} ${seconds.toFixed(3)}`);
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
