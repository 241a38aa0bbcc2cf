import { createIdGenerator } from '@ql/contracts';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { RunCgroups, parseMountinfo } from '../host/cgroup';
import { environHas, waitGroupGone } from '../host/process-table';
import { GroupReaper } from './group-reaper';
import { cgroupKillShell, killLeftoverCgroup, sweepLeftoverCgroups } from './leftover-group';
import {
  ATTEMPT_MARKER,
  LaunchRequest,
  LocalProcessExecutor,
  LocalRun,
  ProcessOutcome,
} from './local-process.executor';

/**
 * Runs contained by cgroup v2 (ADR 0030), on this host's real cgroup v2 tree: a task that leaves its
 * process group with `setsid` is still killed, and the attempt's cgroup is measured and removed.
 */
const ids = createIdGenerator();
const mount = parseMountinfo(readFileSync('/proc/self/mountinfo', 'utf8')).find(
  (m) => m.fsType === 'cgroup2',
);
if (!mount) throw new Error('these tests need a writable cgroup v2 mount, as this host has');
/** This file's runs folder (an explicit QL_WORKER_CGROUP path), removed at the end. */
const base = join(mount.point, `ql-test-exec-${process.pid}`) as `/${string}`;
/** The executor's own folder in it, where its attempt cgroups go. */
const WORKER_FOLDER = 'exec-spec';
const runs = join(base, WORKER_FOLDER);
/** A worker folder whose reaper ends (its worker died). */
const REAPER_FOLDER = join(base, 'reaper-spec');
/**
 * A daemon: leaves the task's process group and session, ignores SIGTERM (its `sleep`s too), keeps
 * the run's output pipe open and writes a marker line every 100 ms. Only `cgroup.kill` ends it; while
 * it lives the run's output never closes and the run never settles.
 */
const DAEMON = `setsid sh -c 'trap "" TERM; while :; do date +%s%3N >> "$M/daemon"; sleep 0.1; done' &`;
/** The task's part after starting the daemon: wait until the daemon wrote its first line. */
const UNTIL_DAEMON_RAN = 'while [ ! -s "$M/daemon" ]; do sleep 0.01; done;';

let root: string;
beforeEach(() => (root = mkdtempSync(join(tmpdir(), 'ql-cgroup-exec-'))));
afterEach(() => rmSync(root, { recursive: true, force: true }));
afterAll(async () => {
  // A run that failed its test may have left its daemon: kill it with its cgroup, whatever happened.
  for (const dir of [runs, REAPER_FOLDER, base]) await sweepLeftoverCgroups(new RunCgroups(dir, false), 0);
  new RunCgroups(REAPER_FOLDER, false).removeIfEmpty();
  new RunCgroups(runs, false, base).removeIfEmpty();
});

/** Live processes carrying the attempt's marker (every process a run starts inherits it). */
function attemptProcesses(attemptId: string): number[] {
  return readdirSync('/proc')
    .filter((name) => /^\d+$/.test(name))
    .map(Number)
    .filter((pid) => pid !== process.pid && environHas(pid, ATTEMPT_MARKER, attemptId));
}

async function until(what: string, probe: () => boolean, withinMs = 30_000): Promise<void> {
  const deadline = Date.now() + withinMs;
  while (!probe()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await delay(20);
  }
}

/** The run's outcome, or a failure if it has not settled within 15 s (a bound on a hang only). */
async function settled(run: LocalRun): Promise<ProcessOutcome> {
  let timer: NodeJS.Timeout | undefined;
  const hang = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error('the run did not settle within 15 s')), 15_000);
  });
  try {
    return await Promise.race([run.done, hang]);
  } finally {
    clearTimeout(timer);
  }
}

async function launch(request: Partial<LaunchRequest>, path?: string) {
  const markers = join(root, 'markers');
  mkdirSync(markers);
  const attemptId = ids.uuidV7();
  const executor = new LocalProcessExecutor({
    workRoot: join(root, 'runs'),
    killGraceMs: 300,
    outputCapBytes: 1 << 20,
    cgroup: base,
    cgroupFolder: WORKER_FOLDER,
    ...(path ? { path } : {}),
  });
  const run = await executor.launch({
    offerId: ids.uuidV7(),
    attemptId,
    runtime: 'shell',
    command: 'true',
    env: { M: markers },
    timeoutMs: 30_000,
    ...request,
  });
  return { run, attemptId, cgroup: join(runs, attemptId), daemon: join(markers, 'daemon') };
}

describe('runs contained by cgroup v2', () => {
  it('a daemon left behind by a command that exits 0 (it ignores SIGTERM, holds the output) is killed; CPU is reported; the cgroup is removed', async () => {
    // The command exits 0 only once the daemon has run (wrote its first line): otherwise, on a loaded
    // machine, the kill at the exit may come before the daemon was ever scheduled.
    const { run, attemptId, cgroup, daemon } = await launch({
      command: `${DAEMON} ${UNTIL_DAEMON_RAN} echo started`,
    });
    const outcome = await settled(run);
    expect(outcome).toMatchObject({ status: 'succeeded', exitCode: 0, groupCleared: true });
    expect(outcome.usage?.cpuUsec).toEqual(expect.any(Number));
    expect(outcome.usage?.cpuUsec).toBeGreaterThan(0);
    expect(attemptProcesses(attemptId)).toEqual([]);
    expect(existsSync(cgroup)).toBe(false);
    expect(existsSync(daemon)).toBe(true); // it did run
  });

  it.each([
    ['cancel', 'cancelled', (run: LocalRun) => run.cancel()],
    ['a timeout', 'timed_out', (run: LocalRun) => run.timeOut()],
  ])(
    '%s kills the daemon that left the process group, ignores SIGTERM and holds the output',
    async (_how, status, stop) => {
      const { run, attemptId, cgroup, daemon } = await launch({ command: `${DAEMON} sleep 30` });
      await until('the daemon writing', () => existsSync(daemon));
      const members = readFileSync(join(cgroup, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean);
      expect(members).toContain(String(run.pid));
      expect(members.length).toBeGreaterThanOrEqual(2); // the task's shell, its sleep and the daemon
      stop(run);
      await expect(settled(run)).resolves.toMatchObject({ status, groupCleared: true });
      expect(attemptProcesses(attemptId)).toEqual([]);
      expect(existsSync(cgroup)).toBe(false);
    },
  );

  it('a missing runtime is a start failure and leaves no cgroup', async () => {
    const attempt = launch({ runtime: 'python', command: 'print(1)' }, join(root, 'empty-bin'));
    await expect(attempt).rejects.toMatchObject({ code: 'runtime_unavailable' });
    await expect(attempt).rejects.toThrow(/python3 is not installed on this worker/);
    expect(existsSync(runs) ? readdirSync(runs).filter((name) => /^[0-9a-f-]{36}$/.test(name)) : []).toEqual(
      [],
    );
  });
});

describe('leftover cgroups after a crash', () => {
  /** A cgroup of `attemptId` holding a process in a session of its own, as a crashed worker leaves it. */
  async function leftover(folder: string = base) {
    const attemptId = ids.uuidV7();
    const cgroups = new RunCgroups(folder, false);
    mkdirSync(folder, { recursive: true });
    const cgroup = cgroups.create(attemptId);
    const child = spawn('sleep', ['60'], {
      detached: true,
      stdio: 'ignore',
      env: { [ATTEMPT_MARKER]: attemptId },
    });
    await new Promise((resolve) => child.once('spawn', resolve));
    cgroup.adopt(child.pid!);
    child.unref();
    await until('the leftover process', () => attemptProcesses(attemptId).length === 1);
    return { attemptId, cgroups, path: cgroup.path };
  }

  it('killLeftoverCgroup kills what is in the attempt cgroup and removes it', async () => {
    const { attemptId, cgroups, path } = await leftover();
    await expect(killLeftoverCgroup(cgroups, attemptId, 300)).resolves.toBe('killed');
    expect(attemptProcesses(attemptId)).toEqual([]);
    expect(existsSync(path)).toBe(false);
    await expect(killLeftoverCgroup(cgroups, attemptId, 300)).resolves.toBe('gone');
  });

  it("at restart every attempt cgroup left in the worker's folder is swept: the populated one killed, the empty one removed", async () => {
    const { attemptId, cgroups, path } = await leftover();
    const empty = cgroups.create(ids.uuidV7()).path;
    const swept = await sweepLeftoverCgroups(cgroups, 300);
    expect(swept).toEqual(
      expect.arrayContaining([
        { attemptId, verdict: 'killed' },
        { attemptId: empty.split('/').at(-1), verdict: 'gone' },
      ]),
    );
    expect(attemptProcesses(attemptId)).toEqual([]);
    expect({ populated: existsSync(path), empty: existsSync(empty) }).toEqual({
      populated: false,
      empty: false,
    });
    expect(cgroups.attempts()).toEqual([]);
  });

  it("the reaper, when its worker dies (its input ends), kills the attempt cgroup and removes it and the worker's folder", async () => {
    const { attemptId, cgroups, path } = await leftover(REAPER_FOLDER);
    const reaper = new GroupReaper();
    reaper.track(attemptProcesses(attemptId)[0]!, path);
    const pid = reaper.pid!;
    reaper.release(); // as the kernel closes the pipe of a worker killed with -9
    expect(await waitGroupGone(pid, 10_000)).toBe(true);
    expect(attemptProcesses(attemptId)).toEqual([]);
    expect({ cgroup: existsSync(path), folder: existsSync(cgroups.base) }).toEqual({
      cgroup: false,
      folder: false,
    });
  });

  it('the reaper snippet (sh) kills what is in the attempt cgroup and removes it', async () => {
    const { attemptId, cgroups, path } = await leftover();
    const shell = spawnSync('/bin/sh', ['-c', cgroupKillShell(cgroups, attemptId)], { encoding: 'utf8' });
    expect({ status: shell.status, stderr: shell.stderr }).toEqual({ status: 0, stderr: '' });
    expect(attemptProcesses(attemptId)).toEqual([]);
    expect(existsSync(path)).toBe(false);
  });
});
