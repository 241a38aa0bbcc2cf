import type { RecordedProcess } from '../journal/journal-record';
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
