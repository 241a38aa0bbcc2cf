/**
 * A task that daemonizes (`setsid`) leaves its process group: killing the group on cancel, on timeout
 * or after the command exits left it running while the run was reported ended (issue 15, item 7).
 * Each attempt runs in a cgroup of its own (QL_WORKER_CGROUP=auto on this host, whose cgroup v2 tree
 * is writable, ADR 0030), under the worker's own folder. The daemon ignores SIGTERM and keeps the run's
 * output open (issue 28): only `cgroup.kill` ends it. In each case, once the run is terminal, no process of the attempt is left,
 * the daemon's marker file stops growing, the cgroup is removed, and the worker's 'attempt completed'
 * line carries the attempt's CPU time.
 *
 * SQLite only: what is under test is the worker host's containment; the control plane's part (cancel,
 * deadline, completion) is the same on both dialects and covered by remote-runs.e2e-spec.
 */
import { existsSync, mkdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { RunCgroups } from '../../apps/worker/src/host/cgroup';
import { killLeftoverCgroup } from '../../apps/worker/src/executor/leftover-group';
import {
  RemoteRunHarness,
  RunWorker,
  attemptProcesses,
  eventually,
  finishedEvent,
} from '../support/remote-run-harness';

jest.setTimeout(180_000);

/**
 * Leaves the task's process group and session, ignores SIGTERM (its `sleep`s too) and keeps the run's
 * output open; appends a timestamp to "$M/daemon" every 100 ms. Only `cgroup.kill` ends it.
 */
const DAEMON = `setsid sh -c 'trap "" TERM; while :; do date +%s%3N >> "$M/daemon"; sleep 0.1; done'`;

describe('a task that daemonizes with setsid, on a worker with cgroup containment (sqlite)', () => {
  let h: RemoteRunHarness;
  let worker: RunWorker;
  let base: string;
  const attempts: string[] = [];
  let markerNo = 0;

  beforeAll(async () => {
    h = await RemoteRunHarness.start('sqlite', ['worker-a']);
    worker = h.startWorker('worker-a');
    await h.untilOnline(worker);
    const line = worker.lines.find((l) => l.msg === 'runs are contained by cgroup v2');
    if (!line) throw new Error(`the worker did not say it contains runs by cgroup v2\n${h.transcripts()}`);
    base = String(line.cgroup);
  });
  afterEach(async () => {
    // On a failure (today's code) the daemon would run on: kill it and its cgroup, whatever happened.
    for (const id of attempts.splice(0)) {
      for (const pid of attemptProcesses(id)) process.kill(pid, 'SIGKILL');
      if (existsSync(join(base, id))) await killLeftoverCgroup(new RunCgroups(base, false), id, 0);
    }
  });
  afterAll(async () => {
    await h?.close();
    new RunCgroups(base, false).removeIfEmpty(); // the worker's folder, if a failure left it
  });

  /** Starts a run of `command` (with `M` = a fresh marker folder); resolves once the daemon writes. */
  async function daemonRun(command: string, spec: Record<string, unknown> = {}) {
    const markers = h.folder(`markers-${++markerNo}`);
    mkdirSync(markers);
    const daemon = join(markers, 'daemon');
    const runId = await h.trigger(
      await h.createTask({ runtime: 'shell', command, env: { M: markers }, ...spec }),
    );
    const attemptId = await eventually(
      'the attempt and its daemon writing',
      async () => {
        const id = (await h.run(runId)).attempts[0]?.id;
        if (id && !attempts.includes(id)) attempts.push(id);
        return id && existsSync(daemon) ? id : undefined;
      },
      { context: () => h.transcripts() },
    );
    return { runId, attemptId, daemon };
  }

  /** The daemon's lines: the epoch ms of each beat. */
  const beats = (daemon: string) => readFileSync(daemon, 'utf8').trim().split('\n').map(Number);

  /** The epoch ms of the worker's first line `msg` about the attempt. */
  const lineTime = async (msg: string, attemptId: string) =>
    Date.parse(
      String(
        (await eventually(msg, () => worker.lines.find((l) => l.msg === msg && l.attemptId === attemptId)))
          .time,
      ),
    );

  /**
   * What a user checks once the run is terminal: nothing of the attempt runs, nothing of it is left,
   * and the daemon stopped by `killedBy` (epoch ms): by the kill of the cancel, timeout or exit itself
   * (SIGTERM, `cgroup.kill` after the 0.5 s grace), not by the reaper's switch at the lease's hard stop,
   * which also `cgroup.kill`s and so hid a cancel without `cgroup.kill` (it stopped the daemon ~3.5 s later).
   */
  async function expectNothingLeft(attemptId: string, daemon: string, killedBy: number) {
    expect(attemptProcesses(attemptId)).toEqual([]);
    expect(existsSync(join(base, attemptId))).toBe(false);
    const size = statSync(daemon).size;
    // Not an event to await: an absence. Six of the daemon's 100 ms periods pass without a new line.
    await delay(600);
    expect(statSync(daemon).size).toBe(size);
    expect(Math.max(...beats(daemon)) - killedBy).toBeLessThan(0);
    const completed = await eventually('the attempt completed line', () =>
      worker.lines.find((l) => l.msg === 'attempt completed' && l.attemptId === attemptId),
    );
    expect(completed.cpuUsec).toEqual(expect.any(Number));
    expect(Number(completed.cpuUsec)).toBeGreaterThan(0);
  }

  it('(a) cancelled through the admin API: the daemon dies with the attempt', async () => {
    const { runId, attemptId, daemon } = await daemonRun(`${DAEMON} & echo ready; sleep 60`);
    // It runs in its cgroup, the daemon with it (it left the process group, not the cgroup).
    const members = readFileSync(join(base, attemptId, 'cgroup.procs'), 'utf8')
      .trim()
      .split('\n');
    expect(members.length).toBeGreaterThanOrEqual(3); // the task's sh, its sleep, the daemon's sh
    expect((await h.t.admin('POST', `/api/v1/runs/${runId}/cancel`)).status).toBe(200);
    const run = await h.untilRunEnds(runId);
    expect({ run: run.status, finished: finishedEvent(run, attemptId)?.detail?.status }).toEqual({
      run: 'cancelled',
      finished: 'cancelled',
    });
    // 2 s after the worker heard the cancel: the 0.5 s grace and room for a loaded machine.
    await expectNothingLeft(
      attemptId,
      daemon,
      (await lineTime('cancel requested; killing the run', attemptId)) + 2_000,
    );
  });

  it('(b) past its timeout: the daemon dies with the attempt', async () => {
    const { runId, attemptId, daemon } = await daemonRun(`${DAEMON} & echo ready; sleep 60`, {
      timeoutMs: 2_000,
    });
    const run = await h.untilRunEnds(runId);
    expect(run.status).toBe('timed_out');
    // 2 s past its 2 s timeout, counted from its start: the grace and room for a loaded machine.
    await expectNothingLeft(attemptId, daemon, (await lineTime('attempt started', attemptId)) + 4_000);
  });

  it('(c) the command exits 0 at once: the daemon it left (holding its output) is killed and the run succeeds', async () => {
    // The command exits as soon as the daemon wrote its first line; the daemon keeps the output open.
    const { runId, attemptId, daemon } = await daemonRun(
      `${DAEMON} & while [ ! -s "$M/daemon" ]; do sleep 0.05; done; exit 0`,
    );
    const run = await h.untilRunEnds(runId);
    expect({ run: run.status, finished: finishedEvent(run, attemptId)?.detail }).toEqual({
      run: 'succeeded',
      finished: expect.objectContaining({ status: 'succeeded', exitCode: 0 }),
    });
    // 2 s after its first line, which the command waited for before it exited.
    await expectNothingLeft(attemptId, daemon, beats(daemon)[0]! + 2_000);
  });

  it('(d) the worker killed with -9 (last: it ends this worker): its reaper kills the cgroup, daemon and all', async () => {
    const { attemptId, daemon } = await daemonRun(`${DAEMON} & echo ready; sleep 60`);
    worker.kill('SIGKILL');
    await worker.exited;
    // The reaper's input ended with the worker: it kills the group, `cgroup.kill`s the cgroup, then
    // removes it and the worker's folder (ADR 0030): nothing is left behind for a worker never restarted.
    await eventually('the attempt cgroup removed', () =>
      existsSync(join(base, attemptId)) ? undefined : true,
    );
    expect(attemptProcesses(attemptId)).toEqual([]);
    expect(existsSync(base)).toBe(false);
    const size = statSync(daemon).size;
    // An absence again: six of the daemon's 100 ms periods pass without a new line.
    await delay(600);
    expect(statSync(daemon).size).toBe(size);
  });
});
