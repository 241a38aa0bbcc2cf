import { readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { setTimeout as delay } from 'node:timers/promises';
import { join } from 'node:path';

/** One attempt's cgroup v2 (ADR 0030): adopt, signal, kill, measure, remove. */

export const errorCode = (error: unknown) => (error as NodeJS.ErrnoException).code ?? String(error);

/** Removes `dirs` in turn while each is empty: the first still in use (EBUSY) ends it. */
export function removeEmpty(dirs: readonly string[]): void {
  for (const dir of dirs) {
    try {
      rmdirSync(dir);
    } catch (error) {
      if (errorCode(error) !== 'ENOENT') return;
    }
  }
}

/** What an attempt's cgroup measured: all its processes, the exited ones included. */
export interface CgroupUsage {
  /** `usage_usec` of `cpu.stat`: user + system CPU time. */
  readonly cpuUsec: number;
  /** `memory.peak` (bytes), where the memory controller is on for the cgroup (Linux 5.19+). */
  readonly memoryPeakBytes?: number;
}

export class AttemptCgroup {
  constructor(
    readonly path: string,
    /** The folders above it, removed after it while each is empty. */
    private readonly folders: readonly string[] = [],
  ) {}

  /** Moves `pid` (and its future children) into this cgroup. */
  adopt(pid: number): void {
    writeFileSync(join(this.path, 'cgroup.procs'), String(pid));
  }

  /** Whether any process is in it (`populated 1` in `cgroup.events`); false once it is removed. */
  populated(): boolean {
    try {
      return /^populated 1$/m.test(readFileSync(join(this.path, 'cgroup.events'), 'utf8'));
    } catch {
      return false;
    }
  }

  /** Sends `signal` to every process in it (the polite first step; `kill()` is the sure one). */
  signal(signal: NodeJS.Signals): void {
    let pids: string[];
    try {
      pids = readFileSync(join(this.path, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean);
    } catch {
      return;
    }
    for (const pid of pids) {
      try {
        process.kill(Number(pid), signal);
      } catch {
        // gone meanwhile
      }
    }
  }

  /** SIGKILLs every process in it and in its descendants at once (`cgroup.kill`): none can escape. */
  kill(): void {
    try {
      writeFileSync(join(this.path, 'cgroup.kill'), '1');
    } catch (error) {
      if (errorCode(error) !== 'ENOENT') throw error;
    }
  }

  /** Waits until it holds no process or `withinMs` passed; true when empty. */
  async waitEmpty(withinMs: number, everyMs = 20): Promise<boolean> {
    const deadline = Date.now() + withinMs;
    while (this.populated()) {
      if (Date.now() >= deadline) return false;
      await delay(everyMs);
    }
    return true;
  }

  /** CPU and peak memory of the attempt; null when the cgroup is gone. Read it before `remove()`. */
  usage(): CgroupUsage | null {
    let cpu: string;
    try {
      cpu = readFileSync(join(this.path, 'cpu.stat'), 'utf8');
    } catch {
      return null;
    }
    const cpuUsec = Number(/^usage_usec (\d+)$/m.exec(cpu)?.[1] ?? NaN);
    if (!Number.isFinite(cpuUsec)) return null;
    try {
      return {
        cpuUsec,
        memoryPeakBytes: Number(readFileSync(join(this.path, 'memory.peak'), 'utf8').trim()),
      };
    } catch {
      return { cpuUsec };
    }
  }

  /**
   * The attempt is over: waits up to `withinMs` for the cgroup to empty (a kill is already under
   * way), kills what is still in it, reads its usage and removes it. `cleared`: nothing is left.
   */
  async release(withinMs: number): Promise<{ cleared: boolean; usage: CgroupUsage | null }> {
    let empty = await this.waitEmpty(withinMs);
    if (!empty) {
      this.kill();
      empty = await this.waitEmpty(2000);
    }
    const usage = this.usage();
    return { cleared: empty && this.remove(), usage };
  }

  /** Removes it once empty; true when it no longer exists. */
  remove(): boolean {
    try {
      rmdirSync(this.path);
    } catch (error) {
      if (errorCode(error) !== 'ENOENT') return false;
    }
    removeEmpty(this.folders);
    return true;
  }
}
