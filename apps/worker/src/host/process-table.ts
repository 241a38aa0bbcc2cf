import { readFileSync, readdirSync } from 'node:fs';
import { setTimeout as delay } from 'node:timers/promises';

/**
 * What the worker can learn about processes on this host. On Linux it reads `/proc`; elsewhere only
 * `kill(pid, 0)` is available, so identity checks that need `/proc` answer "unknown" (null).
 */

/** Who a process is, beyond its pid (pids are reused): boot, pid and its start time in clock ticks. */
export interface ProcessIdentity {
  readonly pid: number;
  /** `/proc/sys/kernel/random/boot_id`; null where there is no `/proc`. */
  readonly bootId: string | null;
  /** Field 22 of `/proc/<pid>/stat`; null where there is no `/proc`. */
  readonly startTicks: number | null;
}

interface ProcStat {
  readonly state: string;
  readonly pgrp: number;
  readonly startTicks: number;
}

function readProcStat(pid: number): ProcStat | null {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, 'latin1');
  } catch {
    return null;
  }
  // The command name may hold spaces and parentheses: the fields start after the last ')'.
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
  return { state: fields[0]!, pgrp: Number(fields[2]), startTicks: Number(fields[19]) };
}

let bootId: string | null | undefined;

/** This boot's id, read once: a process cannot outlive the boot it runs in (every run records it). */
export function currentBootId(): string | null {
  if (bootId !== undefined) return bootId;
  try {
    bootId = readFileSync('/proc/sys/kernel/random/boot_id', 'latin1').trim();
  } catch {
    bootId = null;
  }
  return bootId;
}

export function identityOf(pid: number): ProcessIdentity {
  return { pid, bootId: currentBootId(), startTicks: readProcStat(pid)?.startTicks ?? null };
}

/** kill(pid, 0): true when the pid exists (EPERM: it exists but belongs to someone else). */
export function pidExists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** True unless the process recorded in `identity` is certainly gone (other boot, no pid, other start). */
export function isSameProcessAlive(identity: ProcessIdentity): boolean {
  const boot = currentBootId();
  if (identity.bootId !== null && boot !== null && identity.bootId !== boot) return false;
  if (!pidExists(identity.pid)) return false;
  if (identity.startTicks === null) return true;
  const stat = readProcStat(identity.pid);
  return stat === null || (stat.startTicks === identity.startTicks && stat.state !== 'Z');
}

/** Whether this host has `/proc` (Linux): group membership and environments can be read. */
export function hasProcFs(): boolean {
  return currentBootId() !== null;
}

/**
 * The live members of process group `pgid`: pids whose `/proc/<pid>/stat` names that group and that
 * are not zombies (a zombie runs nothing; whether it is reaped depends on PID 1). Needs `/proc`.
 */
export function liveGroupMembers(pgid: number): number[] {
  const members: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const stat = readProcStat(Number(name));
    if (stat && stat.pgrp === pgid && stat.state !== 'Z' && stat.state !== 'X') members.push(Number(name));
  }
  return members;
}

/** Whether the process started with `name=value` in its environment (`/proc/<pid>/environ`). */
export function environHas(pid: number, name: string, value: string): boolean {
  try {
    return readFileSync(`/proc/${pid}/environ`, 'latin1').split('\0').includes(`${name}=${value}`);
  } catch {
    return false;
  }
}

/** Signals every process of group `pgid`; false when the group no longer exists. */
export function signalGroup(pgid: number, signal: NodeJS.Signals | 0): boolean {
  try {
    process.kill(-pgid, signal);
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ESRCH') return false;
    throw error;
  }
}

/**
 * kill(-pgid, 0): false only on ESRCH, i.e. the kernel knows no process (zombies included) in group
 * `pgid`. EPERM or success: something is in the group, perhaps only zombies or someone else's.
 */
export function groupHasProcess(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code !== 'ESRCH';
  }
}

/**
 * Whether group `pgid` still has a live member (zombies excluded where `/proc` can tell). The kernel
 * is asked first: a group it knows nothing of has ended, with no `/proc` scan (a scan reads every
 * process's stat, O(processes on the host)); only a group that exists is scanned, to tell zombies
 * apart. `scan` is injectable so tests can count the scans.
 */
export function groupAlive(pgid: number, scan: (pgid: number) => number[] = liveGroupMembers): boolean {
  if (!groupHasProcess(pgid)) return false;
  return hasProcFs() ? scan(pgid).length > 0 : true;
}

/**
 * Waits until group `pgid` has no live member or `withinMs` passed; true when it is gone. A group
 * emptying is no event a parent can await (grandchildren are not its children), so this polls.
 */
export async function waitGroupGone(pgid: number, withinMs: number, everyMs = 20): Promise<boolean> {
  const until = Date.now() + withinMs;
  while (groupAlive(pgid)) {
    if (Date.now() >= until) return false;
    await delay(everyMs);
  }
  return true;
}
