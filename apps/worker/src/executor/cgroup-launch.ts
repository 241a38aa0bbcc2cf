import type { ChildProcess } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { join } from 'node:path';
import type { Writable } from 'node:stream';
import { AttemptCgroup, RunCgroups } from '../host/cgroup';
import { StartFailedError } from './start-failed-error';

/**
 * The `sh` that starts a run in its cgroup (ADR 0030): it waits on fd 3 until the worker has moved
 * it into the attempt's cgroup, then `exec`s the command (same pid, same group) with fd 3 closed.
 * Nothing of the task runs before the move, so every descendant starts inside. The worker moves it
 * (not the `sh` itself): that needs no write access of the task's user to the cgroup tree.
 */
const WRAPPER = 'IFS= read -r go <&3 && [ "$go" = go ] || exit 125; exec "$0" "$@" 3<&-';

export interface ContainedLine {
  readonly cgroup: AttemptCgroup;
  readonly file: string;
  readonly args: string[];
  readonly stdio: ['pipe'];
}

/** Whether `file` is an executable on `path` (the wrapper's `exec` would otherwise fail with 127). */
function onPath(file: string, path: string): boolean {
  return path.split(':').some((dir) => {
    try {
      accessSync(join(dir || '.', file), constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
}

/** The attempt's cgroup, made now, and the wrapped command line; throws StartFailedError. */
export function containedLine(
  cgroups: RunCgroups,
  attemptId: string,
  line: { file: string; args: string[] },
  path: string,
): ContainedLine {
  if (!line.file.includes('/') && !onPath(line.file, path))
    throw new StartFailedError(
      'runtime_unavailable',
      `${line.file} is not installed on this worker (not on PATH)`,
    );
  let cgroup: AttemptCgroup;
  try {
    cgroup = cgroups.create(attemptId);
  } catch (error) {
    throw new StartFailedError('spawn_failed', `cannot create the run's cgroup: ${(error as Error).message}`);
  }
  return { cgroup, file: '/bin/sh', args: ['-c', WRAPPER, line.file, ...line.args], stdio: ['pipe'] };
}

/** Moves the waiting wrapper into `cgroup` and lets it go on; if it cannot, kills it (StartFailedError). */
export function moveIntoCgroup(child: ChildProcess, cgroup: AttemptCgroup): void {
  const gate = child.stdio[3] as Writable;
  gate.on('error', () => undefined);
  try {
    cgroup.adopt(child.pid!);
  } catch (error) {
    child.kill('SIGKILL');
    gate.destroy();
    cgroup.remove();
    throw new StartFailedError(
      'spawn_failed',
      `cannot move the run into ${cgroup.path}: ${(error as Error).message}`,
    );
  }
  gate.end('go\n');
}
