import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { chmod, mkdir } from 'node:fs/promises';
import { resolve } from 'node:path';
import { RunAsSpec, WorkerConfigError } from '../config/worker-config';

/** The user and group a run's processes get (ADR 0031). */
export interface RunAsIds {
  readonly uid: number;
  readonly gid: number;
  /** As configured: the user name or `<uid>:<gid>`. */
  readonly label: string;
}

const SETTING = 'QL_WORKER_RUN_AS';

/**
 * The capabilities a worker with a task user needs, and all the deployments give it (as root):
 * SETUID/SETGID to drop to the task user, KILL to signal the runs' groups, CHOWN to give each run
 * its folder. None reaches a task: leaving uid 0 clears them.
 */
export const RUN_AS_CAPABILITIES = ['CHOWN', 'KILL', 'SETGID', 'SETUID'] as const;

/**
 * `QL_WORKER_RUN_AS` as ids: a name is looked up in `passwd` (/etc/passwd: users only a directory
 * service knows are given as `<uid>:<gid>`). Refuses uid 0 and the worker's own uid: a task running
 * as either could read the worker's key, journal and environment.
 */
export function resolveRunAs(
  spec: RunAsSpec,
  ownUid: number = process.getuid!(),
  passwd: () => string = () => readFileSync('/etc/passwd', 'utf8'),
): RunAsIds {
  let ids: RunAsIds;
  if ('user' in spec) {
    const entry = passwd()
      .split('\n')
      .map((line) => line.split(':'))
      .find((fields) => fields[0] === spec.user && fields.length >= 4);
    if (!entry) {
      throw new WorkerConfigError(
        `${SETTING}=${spec.user}: no such user in /etc/passwd (or give <uid>:<gid>)`,
      );
    }
    ids = { uid: Number(entry[2]), gid: Number(entry[3]), label: spec.user };
    if (ids.uid === 0 || ids.gid === 0) {
      throw new WorkerConfigError(`${SETTING}=${spec.user} has uid or gid 0: tasks must not run as root`);
    }
  } else {
    ids = { uid: spec.uid, gid: spec.gid, label: `${spec.uid}:${spec.gid}` };
  }
  if (ids.uid === ownUid) {
    throw new WorkerConfigError(
      `${SETTING}=${ids.label} is the worker's own user (uid ${ownUid}): a task would reach its key, journal and environment; name another user, or leave it empty`,
    );
  }
  return ids;
}

/**
 * What a shell task sees of itself, read by the shell alone: its ids and capability sets, whether it
 * can read the key ($1) or the enrollment token file ($3, when there is one), and whether it can
 * enter the work root ($2) by its path.
 */
const PROBE = `while IFS= read -r l; do case "$l" in Uid:*|Gid:*|Groups:*|CapPrm:*|CapEff:*|CapAmb:*) echo "$l";; esac; done < /proc/self/status
if [ -r "$1" ]; then echo "KeyReadable:yes"; fi
if [ -n "$3" ] && [ -r "$3" ]; then echo "TokenReadable:yes"; fi
cd "$2" 2>/dev/null || echo "WorkRootUnreachable:yes"`;

/**
 * Proves at start that a run can be started as `ids` and holds nothing of the worker: makes the work
 * root (0711: the task user may pass, not list), then starts `/bin/sh` as `ids` the way a run starts,
 * and refuses unless it runs with exactly that uid and gid, no supplementary group, no capability,
 * can enter the work root (a run's HOME is below it) and cannot read the worker's TLS key, nor its
 * enrollment token file (`tokenPath`, '' for none: a token with uses left would enroll other worker
 * ids). Every refusal is a configuration error.
 */
export async function checkRunAs(
  ids: RunAsIds,
  workRoot: string,
  tlsKeyPath: string,
  tokenPath = '',
): Promise<void> {
  // A work root the worker cannot make is reported after what the probe finds wrong with the user.
  const made = await mkdir(workRoot, { recursive: true, mode: 0o711 })
    .then(() => chmod(workRoot, 0o711))
    .then(
      () => null,
      (error: Error) => error.message,
    );
  const out = await new Promise<string>((done, reject) => {
    // libuv enters `cwd` before it switches users, so the probe tries the work root itself.
    let child;
    try {
      child = spawn('/bin/sh', ['-c', PROBE, 'probe', tlsKeyPath, resolve(workRoot), tokenPath], {
        uid: ids.uid,
        gid: ids.gid,
        cwd: '/',
        env: { PATH: '/usr/bin:/bin' },
        stdio: ['ignore', 'pipe', 'ignore'],
      });
    } catch (error) {
      // Node throws EPERM (a failed switch) at once; only a few codes come as an 'error' event.
      return reject(switchError(ids, error as NodeJS.ErrnoException));
    }
    let text = '';
    child.stdout.on('data', (data: Buffer) => (text += data.toString('latin1')));
    child.once('error', (error: NodeJS.ErrnoException) => reject(switchError(ids, error)));
    child.once('close', () => done(text));
  });
  const seen = Object.fromEntries(
    out
      .split('\n')
      .filter(Boolean)
      .map((line) => [line.slice(0, line.indexOf(':')), line.slice(line.indexOf(':') + 1).trim()]),
  );
  const fail = (what: string) => {
    throw new WorkerConfigError(`${SETTING}=${ids.label}: ${what}`);
  };
  if (seen.Uid === undefined) fail(`a shell started as uid ${ids.uid} could not read /proc/self/status`);
  const allIs = (field: string | undefined, id: number) => field?.split(/\s+/).every((v) => Number(v) === id);
  if (!allIs(seen.Uid, ids.uid) || !allIs(seen.Gid, ids.gid)) {
    fail(`a run would have uid ${seen.Uid} and gid ${seen.Gid}, not ${ids.uid}:${ids.gid}`);
  }
  if (seen.Groups) fail(`a run would keep the supplementary groups ${seen.Groups}`);
  for (const set of ['CapPrm', 'CapEff', 'CapAmb'] as const) {
    if (seen[set] !== undefined && !/^0+$/.test(seen[set]!)) {
      fail(
        `a run would hold capabilities (${set} ${seen[set]}): give the worker no ambient capabilities; run it as root with a reduced bounding set instead (ADR 0031)`,
      );
    }
  }
  if (made !== null) fail(`the worker cannot make QL_WORKER_WORK_DIR 0711: ${made}`);
  if (seen.WorkRootUnreachable) {
    fail(
      `uid ${ids.uid} cannot enter QL_WORKER_WORK_DIR (${workRoot}), where a run's HOME is: every folder above it must be searchable (x) by that user`,
    );
  }
  if (seen.KeyReadable) {
    fail(
      `the task user can read QL_WORKER_TLS_KEY (${tlsKeyPath}): make it 0600 (or 0400) and owned by the worker's user`,
    );
  }
  if (seen.TokenReadable) {
    fail(
      `the task user can read QL_WORKER_ENROLL_TOKEN_FILE (${tokenPath}): make it 0600 (or 0400) and owned by the worker's user, or its folder unreachable to others`,
    );
  }
}

function switchError(ids: RunAsIds, error: NodeJS.ErrnoException): WorkerConfigError {
  if (error.code === 'EPERM') {
    return new WorkerConfigError(
      `${SETTING}=${ids.label}: the worker cannot switch to uid ${ids.uid} (EPERM): run it as root with CAP_SETUID, CAP_SETGID, CAP_KILL and CAP_CHOWN (docs/operations.md), or leave ${SETTING} empty`,
    );
  }
  return new WorkerConfigError(
    `${SETTING}=${ids.label}: a process could not be started as uid ${ids.uid}: ${error.message}`,
  );
}
