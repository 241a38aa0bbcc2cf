import { createIdGenerator } from '@ql/contracts';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { monotonicNow } from '../host/monotonic';
import { liveGroupMembers, waitGroupGone } from '../host/process-table';
import { GroupReaper } from './group-reaper';
import { LaunchRequest, LocalProcessExecutor, LocalRun, StartFailedError } from './local-process.executor';
import { OutputChunk } from './output-limiter';

const ids = createIdGenerator();
let root: string;
beforeEach(() => (root = mkdtempSync(join(tmpdir(), 'ql-exec-'))));
afterEach(() => rmSync(root, { recursive: true, force: true }));

const executor = (
  over: Partial<ConstructorParameters<typeof LocalProcessExecutor>[0]> = {},
  reaper?: GroupReaper,
) =>
  new LocalProcessExecutor(
    {
      workRoot: join(root, 'runs'),
      killGraceMs: 300,
      outputCapBytes: 1 << 20,
      ...over,
    },
    reaper,
  );

/** A reaper whose dead man's switch never fires: the executor's own kill timers alone. */
class NoSwitchReaper extends GroupReaper {
  override arm(): void {}
}

/** Launches and collects the output; `firstOutput` resolves on the first chunk (an event, not a sleep). */
async function run(
  request: Partial<LaunchRequest>,
  over?: Parameters<typeof executor>[0],
  reaper?: GroupReaper,
) {
  const chunks: OutputChunk[] = [];
  let announce!: () => void;
  const firstOutput = new Promise<void>((resolve) => (announce = resolve));
  const launched = await executor(over, reaper).launch({
    offerId: ids.uuidV7(),
    attemptId: ids.uuidV7(),
    runtime: 'shell',
    command: 'true',
    env: {},
    timeoutMs: 30_000,
    onOutput: (c) => {
      chunks.push(c);
      announce();
    },
    ...request,
  });
  const text = (stream: OutputChunk['stream']) =>
    Buffer.concat(chunks.filter((c) => c.stream === stream && !c.truncated).map((c) => c.data)).toString();
  return { launched, chunks, firstOutput, text };
}

/** The group's processes that still run (zombies excluded: PID 1 of a test box may never reap them). */
const alive = (r: LocalRun) => liveGroupMembers(r.pgid);

describe('LocalProcessExecutor (R-WRK-3)', () => {
  it('creates nothing until launch()', () => {
    executor();
    expect(existsSync(join(root, 'runs'))).toBe(false);
  });

  it('runs a shell command in a fresh 0700 work folder, streams both outputs and reports success', async () => {
    const r = await run({ command: 'echo hello; pwd; echo oops >&2' });
    const outcome = await r.launched.done;
    expect(outcome).toMatchObject({ status: 'succeeded', exitCode: 0, signal: null, groupCleared: true });
    expect(r.text('stdout')).toBe(`hello\n${r.launched.workDir}\n`);
    expect(r.text('stderr')).toBe('oops\n');
    expect(r.chunks.map((c) => c.seq)).toEqual(r.chunks.map((_, i) => i));
    expect(statSync(r.launched.workDir).mode & 0o777).toBe(0o700);
    expect(statSync(join(root, 'runs')).mode & 0o777).toBe(0o700);
    expect(r.launched.pgid).toBe(r.launched.pid);
  });

  it.each([
    ['an exit code', 'exit 3', { status: 'failed', exitCode: 3, signal: null }],
    ['a signal', 'kill -USR1 $$', { status: 'failed', exitCode: null, signal: 'SIGUSR1' }],
  ])('reports failure by %s', async (_name, command, expected) => {
    const r = await run({ command });
    await expect(r.launched.done).resolves.toMatchObject(expected);
  });

  it('gives the child only the pinned env over PATH, HOME=work folder and LANG: no worker secret leaks', async () => {
    process.env.QL_WORKER_TLS_KEY = '/secret/worker.key';
    try {
      const attemptId = ids.uuidV7();
      const r = await run({
        runtime: 'node',
        attemptId,
        command: 'console.log(JSON.stringify({ env: process.env, cwd: process.cwd() }))',
        env: { GREETING: 'hi', LANG: 'en_US.UTF-8' },
      });
      await expect(r.launched.done).resolves.toMatchObject({ status: 'succeeded' });
      const seen = JSON.parse(r.text('stdout')) as { env: Record<string, string>; cwd: string };
      expect(seen.cwd).toBe(r.launched.workDir);
      expect(seen.env).toEqual({
        PATH: process.env.PATH,
        HOME: r.launched.workDir,
        LANG: 'en_US.UTF-8',
        GREETING: 'hi',
        QL_ATTEMPT_ID: attemptId,
      });
    } finally {
      delete process.env.QL_WORKER_TLS_KEY;
    }
  });

  it('runs python with python3 from a script file in the work folder', async () => {
    const probe = spawnSync('python3', ['--version'], { encoding: 'utf8' });
    if (probe.status !== 0)
      throw new Error('this test needs python3 on PATH (the python runtime runs python3)');
    const r = await run({
      runtime: 'python',
      command: 'import os, sys\nprint(sys.version_info[0], os.getcwd())',
    });
    await expect(r.launched.done).resolves.toMatchObject({ status: 'succeeded' });
    expect(r.text('stdout')).toBe(`3 ${r.launched.workDir}\n`);
  });

  it('fails to start, clearly, when the runtime is missing or the work folder exists', async () => {
    const missing = run({ runtime: 'python', command: 'print(1)' }, { path: join(root, 'empty-bin') });
    await expect(missing).rejects.toThrow(StartFailedError);
    await expect(missing).rejects.toMatchObject({ code: 'runtime_unavailable' });
    await expect(missing).rejects.toThrow(/python3 is not installed on this worker/);
    const offerId = ids.uuidV7();
    await (
      await run({ offerId })
    ).launched.done;
    await expect(run({ offerId })).rejects.toMatchObject({ code: 'work_dir_exists' });
  });

  it('times out: SIGTERM to the whole group at the deadline; nothing of it is left', async () => {
    const r = await run({ command: 'sleep 30 & echo started; wait', timeoutMs: 400 });
    await r.firstOutput;
    expect(alive(r.launched).length).toBeGreaterThanOrEqual(2); // sh and its background sleep
    await expect(r.launched.done).resolves.toMatchObject({ status: 'timed_out', groupCleared: true });
    expect(alive(r.launched)).toEqual([]);
  });

  it('escalates to SIGKILL after the grace when the group ignores SIGTERM', async () => {
    const r = await run({ command: 'trap "" TERM; sleep 30 & echo started; wait', timeoutMs: 300 });
    await r.firstOutput;
    await expect(r.launched.done).resolves.toMatchObject({
      status: 'timed_out',
      signal: 'SIGKILL',
      groupCleared: true,
    });
    expect(alive(r.launched)).toEqual([]);
  });

  it.each([
    ['cancel, then a hard stop 300 ms away', true],
    ['a hard stop 300 ms away, then cancel', false],
  ])(
    "SIGKILL at the hard stop by the run's own timer, long before a 5 s grace passed (%s; the reaper's switch never fires)",
    async (_order, cancelFirst) => {
      const r = await run(
        { command: 'trap "" TERM; sleep 30 & echo started; wait' },
        { killGraceMs: 5_000 },
        new NoSwitchReaper(),
      );
      await r.firstOutput;
      const hardStop = monotonicNow() + 300;
      if (cancelFirst) r.launched.cancel();
      r.launched.stopBy(hardStop);
      if (!cancelFirst) r.launched.cancel();
      // Gone well between the hard stop (0.3 s) and the end of the grace (5 s): the grace gave way.
      expect(await waitGroupGone(r.launched.pgid, 3_000)).toBe(true);
      await expect(r.launched.done).resolves.toMatchObject({
        status: 'cancelled',
        signal: 'SIGKILL',
        groupCleared: true,
      });
    },
  );

  it('cancel() kills the exact group: the run and its grandchild, not a neighbour run', async () => {
    const neighbour = await run({ command: 'sleep 30 & echo started; wait' });
    const r = await run({ command: 'sleep 30 & echo started; wait' });
    await Promise.all([r.firstOutput, neighbour.firstOutput]);
    r.launched.cancel();
    await expect(r.launched.done).resolves.toMatchObject({ status: 'cancelled', groupCleared: true });
    expect(alive(r.launched)).toEqual([]);
    expect(alive(neighbour.launched).length).toBeGreaterThanOrEqual(2);
    neighbour.launched.cancel();
    await expect(neighbour.launched.done).resolves.toMatchObject({ status: 'cancelled' });
  });

  it('kills what a finished command left running in its group; the outcome stays its own', async () => {
    const r = await run({ command: 'sleep 30 >/dev/null 2>&1 & echo done' });
    await expect(r.launched.done).resolves.toMatchObject({
      status: 'succeeded',
      exitCode: 0,
      groupCleared: true,
    });
    expect(alive(r.launched)).toEqual([]);
    r.launched.cancel(); // after the end: changes nothing
    await expect(r.launched.done).resolves.toMatchObject({ status: 'succeeded' });
  });

  it('caps output per run with one visible marker and keeps reading so the child is never blocked', async () => {
    const r = await run(
      { command: 'head -c 100000 /dev/zero | tr "\\0" x; echo; echo end >&2' },
      { outputCapBytes: 4096, chunkBytes: 1024 },
    );
    const outcome = await r.launched.done;
    expect(outcome).toMatchObject({
      status: 'succeeded',
      outputBytes: 4096,
      droppedBytes: 100001 + 4 - 4096,
    });
    const data = r.chunks.filter((c) => !c.truncated);
    expect(data.every((c) => c.data.length <= 1024)).toBe(true);
    expect(Buffer.concat(data.map((c) => c.data)).toString()).toBe('x'.repeat(4096));
    const markers = r.chunks.filter((c) => c.truncated);
    expect(markers).toHaveLength(1);
    expect(markers[0]!.data.toString()).toContain('output truncated: the 4096-byte cap was reached');
    expect(r.chunks.at(-1)).toBe(markers[0]);
  });
});
