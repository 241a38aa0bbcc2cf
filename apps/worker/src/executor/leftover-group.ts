import type { RecordedProcess } from '../journal/journal-record';
import { ATTEMPT_ID, RunCgroups } from '../host/cgroup';
import {
  currentBootId,
  environHas,
  hasProcFs,
  liveGroupMembers,
  signalGroup,
  waitGroupGone,
} from '../host/process-table';
import { ATTEMPT_MARKER } from './local-process.executor';

/**
 * `killed`: the group was ours and is gone now. `gone`: nothing of it is left (or it was another
 * boot). `not_ours`: the group id is in use, but no member carries this attempt's marker — left
 * alone. `unverifiable`: no `/proc` here to check the marker — left alone, the caller reports it.
 */
export type LeftoverVerdict = 'killed' | 'gone' | 'not_ours' | 'unverifiable';

/**
 * Kills the process group a crashed predecessor left running for `attemptId` (R-WRK-2), only after
 * proving it is that run's group: same boot, and a live member whose environment carries
 * `QL_ATTEMPT_ID=<attemptId>` (every process a run starts inherits it). A group id cannot be reused
 * while any member of the group exists, so one marked member vouches for the whole group.
 */
export async function killLeftoverGroup(
  recorded: RecordedProcess,
  attemptId: string,
  graceMs: number,
): Promise<LeftoverVerdict> {
  if (!hasProcFs()) return signalGroup(recorded.pgid, 0) ? 'unverifiable' : 'gone';
  if (recorded.bootId !== null && recorded.bootId !== currentBootId()) return 'gone';
  const members = liveGroupMembers(recorded.pgid);
  if (members.length === 0) return 'gone';
  if (!members.some((pid) => environHas(pid, ATTEMPT_MARKER, attemptId))) return 'not_ours';
  signalGroup(recorded.pgid, 'SIGTERM');
  if (await waitGroupGone(recorded.pgid, graceMs)) return 'killed';
  signalGroup(recorded.pgid, 'SIGKILL');
  if (await waitGroupGone(recorded.pgid, 2000)) return 'killed';
  throw new Error(`process group ${recorded.pgid} survived SIGKILL`);
}

function attemptCgroup(cgroups: RunCgroups, attemptId: string) {
  if (!ATTEMPT_ID.test(attemptId)) throw new RangeError('attemptId must be a uuid');
  return cgroups.of(attemptId);
}

/**
 * Kills what a crashed predecessor left in the cgroup of `attemptId` (ADR 0030) and removes it. No
 * proof beyond the name is needed: the worker made the cgroup for this attempt only, and a process
 * cannot move itself out of it (or into it) without write access to the cgroup tree, so whatever is
 * in it is the attempt's — a `setsid` daemon and an `exec env -i` process included. SIGTERM first,
 * `cgroup.kill` after `graceMs`. `killed`: processes were in it and are gone; `gone`: none were.
 * Throws if it still has processes after the kill (e.g. stuck in the kernel).
 */
export async function killLeftoverCgroup(
  cgroups: RunCgroups,
  attemptId: string,
  graceMs: number,
): Promise<'killed' | 'gone'> {
  const cgroup = attemptCgroup(cgroups, attemptId);
  const populated = cgroup.populated();
  if (populated) {
    cgroup.signal('SIGTERM');
    if (!(await cgroup.waitEmpty(graceMs))) cgroup.kill();
    if (!(await cgroup.waitEmpty(2000)))
      throw new Error(`cgroup ${cgroup.path} has processes after cgroup.kill`);
  }
  cgroup.remove();
  return populated ? 'killed' : 'gone';
}

/**
 * At restart, after the journal scan: every attempt cgroup still in this worker's own folder is a
 * predecessor's (this process has launched nothing yet, and the folder is its journal's alone), left
 * by a record the scan does not kill for (`launching`, an outcome already journaled) or by a reaper
 * that could not remove it. Each is killed if populated and removed; one that cannot be emptied is
 * reported (`stuck`) and kept.
 */
export async function sweepLeftoverCgroups(
  cgroups: RunCgroups,
  graceMs: number,
): Promise<{ attemptId: string; verdict: 'killed' | 'gone' | 'stuck' }[]> {
  const swept: { attemptId: string; verdict: 'killed' | 'gone' | 'stuck' }[] = [];
  for (const attemptId of cgroups.attempts()) {
    const verdict = await killLeftoverCgroup(cgroups, attemptId, graceMs).catch(() => 'stuck' as const);
    swept.push({ attemptId, verdict });
  }
  return swept;
}

/**
 * One `sh` line that SIGKILLs everything in the cgroup of `attemptId` and removes the cgroup once it
 * is empty (5 s at most), for the reaper to run when the worker dies; does nothing if it is gone.
 */
export function cgroupKillShell(cgroups: RunCgroups, attemptId: string): string {
  const path = attemptCgroup(cgroups, attemptId).path.replace(/'/g, `'\\''`);
  return (
    `d='${path}'; if [ -d "$d" ]; then { echo 1 > "$d/cgroup.kill"; } 2>/dev/null; i=0; ` +
    `while [ -d "$d" ] && ! rmdir "$d" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.05; i=$((i+1)); done; fi`
  );
}
