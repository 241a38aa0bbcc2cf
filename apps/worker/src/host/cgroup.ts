import { createHash } from 'node:crypto';
import {
  accessSync,
  constants,
  existsSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  writeFileSync,
} from 'node:fs';
import { join, posix, resolve } from 'node:path';
import { AttemptCgroup, errorCode, removeEmpty } from './attempt-cgroup';

export { AttemptCgroup } from './attempt-cgroup';
export type { CgroupUsage } from './attempt-cgroup';

/**
 * Run containment by cgroup v2 (ADR 0030): each attempt in a cgroup of its own, named for the
 * attempt, under a folder the worker may write (a delegated subtree). A process cannot leave its
 * cgroup without write access to a common ancestor, so `setsid` or a double fork no longer escapes
 * the kill, and the cgroup's `cpu.stat` / `memory.peak` measure the whole attempt.
 */

/** `QL_WORKER_CGROUP`: `auto`, `off`, or the absolute path of the folder the attempt cgroups go in. */
export type CgroupSetting = 'auto' | 'off' | `/${string}`;

/** What detection reads of the host (injectable: tests hand it other mount tables). */
export interface CgroupHost {
  /** `/proc/self/mountinfo`. */
  readonly mountinfo: string;
  /** `/proc/self/cgroup`. */
  readonly selfCgroup: string;
  readonly pid: number;
}

export type CgroupChoice =
  | { readonly kind: 'cgroup'; readonly cgroups: RunCgroups }
  | { readonly kind: 'process_group'; readonly reason: string };

/** The sub-folder of the worker's own cgroup that holds the workers' run folders under `auto`. */
export const AUTO_RUNS_FOLDER = 'ql-runs';

/**
 * The folder of one worker's attempt cgroups, under the runs folder: named for its id and its journal
 * folder, whose kernel lock one live process holds (ADR 0029). Workers sharing a cgroup (or a
 * QL_WORKER_CGROUP path) never share it, and a restarted worker finds its predecessor's cgroups there.
 */
export function workerCgroupFolder(workerId: string, journalDir: string): string {
  return `${workerId}-${createHash('sha256').update(resolve(journalDir)).digest('hex').slice(0, 12)}`;
}

/** Where `auto` moves the worker when its own cgroup must be free of processes to enable `memory`. */
export const AUTO_WORKER_FOLDER = 'ql-worker';

interface Mount {
  readonly root: string;
  readonly point: string;
  readonly fsType: string;
}

/** mountinfo escapes space, tab, newline and backslash as `\ooo`. */
const unescape = (field: string) =>
  field.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8)));

export function parseMountinfo(text: string): Mount[] {
  return text
    .split('\n')
    .filter((line) => line.includes(' - '))
    .map((line) => {
      const [left, right] = line.split(' - ') as [string, string];
      const fields = left.split(' ');
      return {
        root: unescape(fields[3] ?? ''),
        point: unescape(fields[4] ?? ''),
        fsType: right.split(' ')[0] ?? '',
      };
    });
}

/** The `0::<path>` line of `/proc/<pid>/cgroup`: the process's cgroup v2 path; null without one. */
export function ownCgroupPath(selfCgroup: string): string | null {
  const line = selfCgroup.split('\n').find((l) => l.startsWith('0::'));
  return line ? line.slice(3).replace(/ \(deleted\)$/, '') : null;
}

function readHost(): CgroupHost {
  const read = (path: string) => {
    try {
      return readFileSync(path, 'utf8');
    } catch {
      return '';
    }
  };
  return { mountinfo: read('/proc/self/mountinfo'), selfCgroup: read('/proc/self/cgroup'), pid: process.pid };
}

const inside = (path: string, dir: string) => dir === '/' || path === dir || path.startsWith(`${dir}/`);

/**
 * Decides, once at start, how runs are contained: cgroups under a writable cgroup v2 folder, or the
 * process group alone (with the reason, for the one start line). Creates the runs folder (`auto`)
 * and the worker's `folder` in it, and may move the worker into a leaf (see `enableMemory`); never throws.
 */
export function chooseRunCgroups(
  setting: CgroupSetting,
  folder: string,
  host: CgroupHost = readHost(),
): CgroupChoice {
  const none = (reason: string): CgroupChoice => ({ kind: 'process_group', reason });
  if (setting === 'off') return none('QL_WORKER_CGROUP=off');
  const mounts = parseMountinfo(host.mountinfo);
  let base: string;
  let own: string | null = null;
  if (setting === 'auto') {
    const mount = mounts.find((m) => m.fsType === 'cgroup2');
    if (!mount) return none('no cgroup v2 is mounted here (cgroup v1 only, or no /proc)');
    const path = ownCgroupPath(host.selfCgroup);
    if (path === null) return none('this process is in no cgroup v2 hierarchy');
    if (!inside(path, mount.root))
      return none(`its cgroup ${path} is not under the cgroup v2 mount ${mount.point}`);
    own = join(mount.point, posix.relative(mount.root, path));
    base = join(own, AUTO_RUNS_FOLDER);
  } else {
    const mount = mounts
      .filter((m) => inside(setting, m.point))
      .sort((a, b) => b.point.length - a.point.length)[0];
    if (mount?.fsType !== 'cgroup2')
      return none(`QL_WORKER_CGROUP=${setting} is not in a cgroup v2 mount (${mount?.fsType ?? 'none'})`);
    base = setting;
  }
  try {
    mkdirSync(base);
  } catch (error) {
    if (errorCode(error) !== 'EEXIST')
      return none(`cannot create the cgroup ${base} (${errorCode(error)}): no delegated cgroup v2 subtree`);
  }
  if (!existsSync(join(base, 'cgroup.procs'))) return none(`${base} is not a cgroup v2 folder`);
  try {
    accessSync(base, constants.W_OK);
    accessSync(join(base, 'cgroup.procs'), constants.W_OK);
  } catch (error) {
    return none(`the cgroup ${base} is not writable (${errorCode(error)}): no delegated cgroup v2 subtree`);
  }
  // `auto`'s ql-runs is shared with the workers beside in the same cgroup and removed by whichever
  // empties it last: a worker that could not make it again (its own cgroup not writable for it, e.g.
  // without CAP_DAC_OVERRIDE on a root-owned 0555 cgroup) would lose its cgroups for good then.
  if (own !== null) {
    try {
      accessSync(own, constants.W_OK);
    } catch (error) {
      return none(
        `its cgroup ${own} is not writable (${errorCode(error)}): it could not make ${AUTO_RUNS_FOLDER} again; no delegated cgroup v2 subtree`,
      );
    }
  }
  if (!existsSync(join(base, 'cgroup.kill')))
    return none('this kernel has no cgroup.kill (Linux 5.14 or later needed)');
  const mine = join(base, folder);
  try {
    mkdirSync(mine, { recursive: true }); // `ql-runs` again too, if the last worker beside just removed it
  } catch (error) {
    return none(`cannot create the cgroup ${mine} (${errorCode(error)})`);
  }
  const cgroups = new RunCgroups(mine, enableMemory(base, mine, own, host.pid), own === null ? null : base);
  cgroups.removeIfEmpty(); // made again with the first attempt; left if a predecessor's are in it
  return { kind: 'cgroup', cgroups };
}

function controllers(dir: string, file: 'cgroup.controllers' | 'cgroup.subtree_control'): string[] {
  try {
    return readFileSync(join(dir, file), 'utf8').trim().split(/\s+/);
  } catch {
    return [];
  }
}

/** `enable` where a failure only costs `memory.peak`. */
function enableQuietly(dir: string): void {
  try {
    enable(dir);
  } catch {
    // memory.peak is left out for this attempt
  }
}

function enable(dir: string): boolean {
  if (controllers(dir, 'cgroup.subtree_control').includes('memory')) return true;
  try {
    writeFileSync(join(dir, 'cgroup.subtree_control'), '+memory');
    return true;
  } catch (error) {
    if (errorCode(error) === 'EBUSY') return false;
    throw error;
  }
}

/**
 * Turns on the `memory` controller for the attempt cgroups when the subtree offers it, so each has a
 * `memory.peak`. A non-root cgroup with processes cannot enable controllers for its children (the
 * "no internal processes" rule): under `auto` the worker then moves itself into the leaf
 * `<own>/ql-worker`, a sibling of `<own>/ql-runs` (systemd `Delegate=yes` allows it); then each
 * level down to the worker's folder passes it on. Best effort:
 * false when it cannot (other processes share the worker's cgroup), and runs go without memory.peak.
 */
function enableMemory(base: string, mine: string, own: string | null, pid: number): boolean {
  try {
    // An explicit path: the operator arranged its parent; only the folder itself is changed.
    if (own === null)
      return controllers(base, 'cgroup.controllers').includes('memory') && enable(base) && enable(mine);
    if (!controllers(own, 'cgroup.controllers').includes('memory')) return false;
    if (!enable(own)) {
      const leaf = join(own, AUTO_WORKER_FOLDER);
      if (!existsSync(leaf)) mkdirSync(leaf);
      writeFileSync(join(leaf, 'cgroup.procs'), String(pid));
      if (!enable(own)) return false;
    }
    return enable(base) && enable(mine);
  } catch {
    return false;
  }
}

/** The worker's one start line about containment: where runs go, or that only the group holds them. */
export function containmentLine(choice: CgroupChoice): {
  level: 'info' | 'warn';
  msg: string;
  fields: Record<string, string | boolean>;
} {
  if (choice.kind === 'cgroup')
    return {
      level: 'info',
      msg: 'runs are contained by cgroup v2',
      fields: { cgroup: choice.cgroups.base, memoryPeak: choice.cgroups.memory },
    };
  return {
    level: 'warn',
    msg: 'runs are contained by process group only: a task that calls setsid can outlive cancel, timeout and a crash',
    fields: { reason: choice.reason },
  };
}

/** The name of an attempt cgroup: the attempt's id. */
export const ATTEMPT_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/**
 * This worker's folder of attempt cgroups; one cgroup per attempt, named by its id. The folder (and
 * `auto`'s `ql-runs`) exists only while it holds one: made with the first, removed with the last, so a
 * worker killed while idle leaves nothing behind.
 */
export class RunCgroups {
  /** Removed, in this order, once empty: the worker's folder, then `auto`'s shared `ql-runs`. */
  private readonly folders: readonly string[];

  constructor(
    readonly base: string,
    /** Whether the attempt cgroups have the memory controller (and so `memory.peak`). */
    readonly memory: boolean,
    /** `auto`'s shared `ql-runs`; null for an operator's path, which stays. */
    runsFolder: string | null = null,
  ) {
    this.folders = runsFolder ? [base, runsFolder] : [base];
  }

  /** The ids of the attempt cgroups in the folder now (at start: a crashed predecessor's). */
  attempts(): string[] {
    try {
      return readdirSync(this.base, { withFileTypes: true })
        .filter((entry) => entry.isDirectory() && ATTEMPT_ID.test(entry.name))
        .map((entry) => entry.name);
    } catch {
      return [];
    }
  }

  /** Removes the folder if it holds no attempt cgroup, then `ql-runs` if no other worker's is left. */
  removeIfEmpty(): void {
    removeEmpty(this.folders);
  }

  /** The attempt's cgroup (made now, with the folders above it); an existing one is taken over. */
  create(attemptId: string): AttemptCgroup {
    const cgroup = this.of(attemptId);
    mkdirSync(cgroup.path, { recursive: true });
    // Folders made again have no controller on for their children yet: the memory controller goes down again.
    if (this.memory) for (const dir of [...this.folders].reverse()) enableQuietly(dir);
    return cgroup;
  }

  /** The cgroup of `attemptId` whether or not it exists (leftover recovery). */
  of(attemptId: string): AttemptCgroup {
    return new AttemptCgroup(join(this.base, attemptId), this.folders);
  }
}
