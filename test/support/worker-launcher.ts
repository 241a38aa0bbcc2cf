/**
 * bin/ql-worker (ADR 0046) run as a real process: on a fake host (its /proc and /sys files written
 * under a temp folder, `QL_WORKER_PROC_ROOT`), with a fixture entry in place of the worker's main that
 * prints what node received, so a test sees the class the launcher chose reach node.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { REPO_ROOT } from './docker-emulation';

/** The launcher, as every deployment names it relative to the app folder. */
export const LAUNCHER = 'bin/ql-worker';
export const LAUNCHER_PATH = join(REPO_ROOT, LAUNCHER);

const MIB = 1024 * 1024;
export const mib = (n: number) => n * MIB;
export const gib = (n: number) => n * 1024 * MIB;

/** What the fixture entry saw: node's V8 flags, its arguments, its pid and the launcher's variables. */
export interface EntrySaw {
  readonly execArgv: string[];
  readonly args: string[];
  readonly pid: number;
  readonly env: Record<string, string | null>;
}

export interface LauncherRun {
  readonly code: number | null;
  readonly pid: number;
  readonly stdout: string;
  readonly stderr: string;
  /** The launcher's JSON line (`worker machine class`), when it printed one. */
  readonly classLine?: Record<string, unknown>;
  /** What the fixture entry printed, when node ran it. */
  readonly saw?: EntrySaw;
}

const ENV_SHOWN = ['QL_WORKER_MACHINE_CLASS', 'QL_WORKER_NODE', 'QL_WORKER_ENTRY', 'QL_WORKER_PROC_ROOT'];

/** A fake host: the files a test names, under a temp folder; `remove()` deletes it. */
export class FakeHost {
  readonly root = mkdtempSync(join(tmpdir(), 'ql-launcher-host-'));

  /** /proc/self/cgroup's lines, e.g. `0::/system.slice/x.service`. */
  cgroup(...lines: string[]): this {
    return this.file('proc/self/cgroup', `${lines.join('\n')}\n`);
  }

  /** /proc/meminfo as Linux writes it, with this MemTotal. */
  memTotal(bytes: number): this {
    const kib = (n: number) => `${String(Math.floor(n / 1024)).padStart(8)} kB`;
    return this.file('proc/meminfo', `MemTotal:       ${kib(bytes)}\nMemFree:        ${kib(bytes / 2)}\n`);
  }

  /** A file under the root: `sys/fs/cgroup/…/memory.max`. */
  file(path: string, text: string): this {
    mkdirSync(dirname(join(this.root, path)), { recursive: true });
    writeFileSync(join(this.root, path), text);
    return this;
  }

  remove(): void {
    rmSync(this.root, { recursive: true, force: true });
  }
}

let fixture: string | undefined;

/** The fixture entry node runs instead of the worker's main. */
function fixtureEntry(): string {
  if (!fixture) {
    const dir = mkdtempSync(join(tmpdir(), 'ql-launcher-entry-'));
    fixture = join(dir, 'entry.js');
    writeFileSync(
      fixture,
      `const shown = ${JSON.stringify(ENV_SHOWN)};
process.stdout.write(JSON.stringify({ execArgv: process.execArgv, args: process.argv.slice(2), pid: process.pid,
  env: Object.fromEntries(shown.map((k) => [k, process.env[k] ?? null])) }) + '\\n');\n`,
    );
  }
  return fixture;
}

export function removeFixtureEntry(): void {
  if (fixture) rmSync(dirname(fixture), { recursive: true, force: true });
  fixture = undefined;
}

/**
 * Runs the launcher with an explicit environment (never this process's): node is this node, the entry
 * the fixture, /proc and /sys the host's folder (the real ones when `host` is null).
 */
export function runLauncher(
  host: FakeHost | null,
  env: Record<string, string> = {},
  args: string[] = [],
): Promise<LauncherRun> {
  const child = spawn(LAUNCHER_PATH, args, {
    env: {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      QL_WORKER_NODE: process.execPath,
      QL_WORKER_ENTRY: fixtureEntry(),
      ...(host ? { QL_WORKER_PROC_ROOT: host.root } : {}),
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => (stdout += c.toString('utf8')));
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString('utf8')));
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => {
      const lines = stdout
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Record<string, unknown>);
      resolve({
        code,
        pid: child.pid!,
        stdout,
        stderr,
        classLine: lines.find((l) => l.msg === 'worker machine class'),
        saw: lines.find((l) => 'execArgv' in l) as EntrySaw | undefined,
      });
    });
  });
}
