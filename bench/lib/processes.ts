/** Child processes for the process-level benchmarks: spawn, watch their JSON log lines, read their RSS. */
import { ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { ownCpuMs, readProcStat } from './proc-cpu';

/** Resident set size of a live process in MiB, from /proc (what `ps` and the kernel's OOM killer see). */
export function rssMiB(pid: number): number {
  return statusMiB(pid, 'VmRSS');
}

/** The largest resident set a live process has had so far, in MiB (`VmHWM` of /proc/<pid>/status). */
export function peakRssMiB(pid: number): number {
  return statusMiB(pid, 'VmHWM');
}

function statusMiB(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = new RegExp(`^${field}:\\s+(\\d+) kB$`, 'm').exec(status)?.[1];
  if (kib === undefined) throw new Error(`no ${field} for pid ${pid}`);
  return Number(kib) / 1024;
}

/** CPU time (user + system) a live process has used so far, in ms, from /proc/<pid>/stat. */
export function cpuMs(pid: number): number {
  return ownCpuMs(readProcStat(pid));
}

/** Polls `check` every `everyMs` until it returns a value, or throws after `timeoutMs`. */
export async function pollUntil<T>(
  what: string,
  check: () => T | undefined | Promise<T | undefined>,
  timeoutMs: number,
  everyMs = 5,
): Promise<T> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (performance.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}

/** A child Node process whose stdout JSON lines are kept, so a bench can await one of them. */
export class BenchProcess {
  readonly lines: Record<string, unknown>[] = [];
  readonly output: string[] = [];
  readonly exited: Promise<number | null>;
  /** performance.now() when the process was spawned. */
  readonly startedAt = performance.now();
  /** Date.now() when the process was spawned, to compare with the times in its log lines. */
  readonly spawnedAtMs = Date.now();
  private done = false;

  constructor(readonly child: ChildProcess) {
    let partial = '';
    child.stdout?.on('data', (chunk: Buffer) => {
      const text = partial + chunk.toString('utf8');
      const parts = text.split('\n');
      partial = parts.pop()!;
      for (const line of parts) {
        this.output.push(line);
        try {
          this.lines.push(JSON.parse(line) as Record<string, unknown>);
        } catch {
          // not a log line
        }
      }
    });
    child.stderr?.on('data', (chunk: Buffer) => this.output.push(chunk.toString('utf8')));
    this.exited = new Promise((resolve) =>
      child.on('exit', (code) => {
        this.done = true;
        resolve(code);
      }),
    );
  }

  get pid(): number {
    return this.child.pid!;
  }

  rssMiB(): number {
    return rssMiB(this.pid);
  }

  cpuMs(): number {
    return cpuMs(this.pid);
  }

  /** Resolves with the first log line whose `msg` is `msg`; rejects if the process exits first. */
  async untilLine(msg: string, timeoutMs: number): Promise<Record<string, unknown>> {
    return pollUntil(
      `"${msg}" from pid ${this.pid}`,
      () => {
        if (this.done) throw new Error(`pid ${this.pid} exited before "${msg}":\n${this.output.join('\n')}`);
        return this.lines.find((l) => l.msg === msg);
      },
      timeoutMs,
      10,
    );
  }

  /** SIGTERM, then SIGKILL if it is still there after `graceMs`. */
  async stop(graceMs = 10_000): Promise<void> {
    if (this.done) return;
    this.child.kill('SIGTERM');
    const timer = setTimeout(() => this.child.kill('SIGKILL'), graceMs);
    await this.exited;
    clearTimeout(timer);
  }
}

/** `node [flags] <script|-e code>` with the given environment (on top of PATH only); `ipc` opens a channel. */
export function spawnNode(args: readonly string[], env: Record<string, string>, ipc = false): BenchProcess {
  return new BenchProcess(
    spawn(process.execPath, args, {
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ...env },
      stdio: ['ignore', 'pipe', 'pipe', ...(ipc ? (['ipc'] as const) : [])],
    }),
  );
}
