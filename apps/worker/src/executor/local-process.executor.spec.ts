import { createIdGenerator } from '@ql/contracts';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { monotonicNow } from '../host/monotonic';
import { liveGroupMembers, waitGroupGone } from '../host/process-table';
import { GroupReaper } from './group-reaper';
import { LaunchRequest, LocalProcessExecutor, LocalRun } from './local-process.executor';
import { StartFailedError } from './start-failed-error';
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

// Issue 27 item 5 and issue 29 item 1 (ADR 0051): the folder a bundle task starts in is checked on the
// disk, its links followed, to be inside the attempt's copy; the node and python runtimes' inline
// script runs from that folder and imports the bundle's own modules, whatever the work root's form.
describe('a bundle task on the disk (ADR 0051)', () => {
  let bundleDir: string;
  beforeEach(() => mkdirSync((bundleDir = join(root, 'bundle-src'))));

  it('refuses a working folder whose links lead out of the copy (bundle_workdir_outside): nothing starts', async () => {
    // The chain, made on the disk so no archive check stands before the executor's own.
    mkdirSync(join(bundleDir, 'a'));
    symlinkSync('..', join(bundleDir, 'a/up'));
    symlinkSync('up/..', join(bundleDir, 'a/x0'));
    for (let i = 1; i <= 15; i++) symlinkSync(`x${i - 1}/..`, join(bundleDir, `a/x${i}`));
    symlinkSync('a/x15', join(bundleDir, 'root'));
    const marker = join(root, 'ran-outside');
    const started = run({ command: `touch ${marker}`, bundle: { dir: bundleDir, workdir: 'root/tmp' } });
    await expect(started).rejects.toThrow(StartFailedError);
    await expect(started).rejects.toMatchObject({ code: 'bundle_workdir_outside' });
    expect(existsSync(marker)).toBe(false);
  });

  it('starts in a working folder reached through a link that stays inside, at its real path', async () => {
    mkdirSync(join(bundleDir, 'v2/任务'), { recursive: true });
    symlinkSync('v2', join(bundleDir, 'current'));
    const r = await run({ command: 'pwd', bundle: { dir: bundleDir, workdir: 'current/任务' } });
    await expect(r.launched.done).resolves.toMatchObject({ status: 'succeeded' });
    expect(r.text('stdout')).toBe(`${join(r.launched.workDir, 'bundle/v2/任务')}\n`);
  });

  it.each([
    ['relative', true],
    ['absolute', false],
  ])(
    'node and python inline scripts import the modules beside them in the working folder (%s work root)',
    async (_what, relativeRoot) => {
      mkdirSync(join(bundleDir, '脚本/lib'), { recursive: true });
      writeFileSync(join(bundleDir, '脚本/lib/问候.js'), "exports.问候 = (who) => '你好，' + who;\n");
      writeFileSync(join(bundleDir, '脚本/helper.py'), "def greet(who):\n    return '你好，' + who\n");
      const workRoot = relativeRoot ? relative(process.cwd(), join(root, 'runs')) : join(root, 'runs');
      const bundle = { dir: bundleDir, workdir: '脚本' };
      for (const [runtime, command] of [
        ['node', "console.log(require('./lib/问候.js').问候('node'))"],
        ['python', "import helper\nprint(helper.greet('python'))"],
      ] as const) {
        const r = await run({ runtime, command, bundle }, { workRoot });
        const outcome = await r.launched.done;
        expect({ status: outcome.status, stdout: r.text('stdout'), stderr: r.text('stderr') }).toEqual({
          status: 'succeeded',
          stdout: `你好，${runtime}\n`,
          stderr: '',
        });
      }
    },
  );
});
