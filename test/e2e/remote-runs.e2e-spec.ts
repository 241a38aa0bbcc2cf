// Size: the outcomes a user sees of runs executed by a real worker process (success per runtime,
// failure, timeout, cancel, log cap, output streams), one control plane and one worker per dialect
// for the file.
import {
  RemoteRunHarness,
  RunWorker,
  attemptProcesses,
  eventually,
  finishedEvent,
} from '../support/remote-run-harness';
import type { Dialect } from '../support/test-plane';

// Real worker processes: a start takes seconds on a loaded machine, a run several of them.
jest.setTimeout(180_000);

/** The control plane's per-run log cap (its minimum, 64 KiB), so a short task can pass it. */
const LOG_CAP_BYTES = 64 * 1024;

describe.each<Dialect>(['sqlite', 'postgres'])('remote runs on a real worker process (%s)', (dialect) => {
  let h: RemoteRunHarness;
  let worker: RunWorker;

  beforeAll(async () => {
    h = await RemoteRunHarness.start(dialect, ['worker-a'], { QL_RUN_LOG_CAP_BYTES: String(LOG_CAP_BYTES) });
    worker = h.startWorker('worker-a');
    await h.untilOnline(worker);
  });
  afterAll(async () => {
    await h?.close();
  });
  afterEach(() => {
    // Every test needs the one worker; one that died takes the rest of the file with it, so say so.
    if (!worker.running) throw new Error(`worker-a exited\n${h.transcripts()}`);
  });

  /** The one attempt of a run that ended, and its `attempt.finished` detail. */
  const onlyAttempt = async (runId: string) => {
    const run = await h.untilRunEnds(runId);
    expect(run.attempts).toHaveLength(1);
    const attempt = run.attempts[0]!;
    return { run, attempt, finished: finishedEvent(run, attempt.id)?.detail };
  };

  it.each([
    ['shell', 'echo "out from shell $QL_GREETING"; echo "err from shell" >&2'],
    ['node', 'console.log(`out from node ${process.env.QL_GREETING}`); console.error("err from node");'],
    [
      'python',
      'import os, sys\nprint("out from python " + os.environ["QL_GREETING"], flush=True)\nprint("err from python", file=sys.stderr)',
    ],
  ])('a %s task succeeds on the worker with its output (both streams) in the run log', async (runtime, command) => {
    const runId = await h.trigger(await h.createTask({ runtime, command, env: { QL_GREETING: `hi-${runtime}` } }));
    const { run, attempt, finished } = await onlyAttempt(runId);
    expect({ run: run.status, attempt: attempt.status, worker: attempt.workerId, finished }).toEqual({
      run: 'succeeded',
      attempt: 'succeeded',
      worker: 'worker-a',
      finished: expect.objectContaining({ status: 'succeeded', exitCode: 0 }),
    });
    const output = await h.output(runId);
    expect(output).toContain(`out from ${runtime} hi-${runtime}\n`);
    expect(output).toContain(`err from ${runtime}\n`);
    const { runEnded, truncated } = await h.logs(runId);
    expect({ runEnded, truncated }).toEqual({ runEnded: true, truncated: false });
  });

  it('a non-zero exit is failed, with its exit code on the attempt', async () => {
    const runId = await h.trigger(await h.createTask({ runtime: 'shell', command: 'echo "about to fail"; exit 7' }));
    const { run, attempt, finished } = await onlyAttempt(runId);
    expect({ run: run.status, attempt: attempt.status, finished }).toEqual({
      run: 'failed',
      attempt: 'failed',
      finished: expect.objectContaining({ status: 'failed', exitCode: 7 }),
    });
    expect(await h.output(runId)).toContain('about to fail\n');
  });

  it('a task past its timeout is timed_out and leaves no process of its group behind', async () => {
    // Two processes in the group: the shell's background child must go too.
    const command = 'echo "sleeping"; sleep 60 & sleep 60; wait';
    const runId = await h.trigger(await h.createTask({ runtime: 'shell', command, timeoutMs: 1_000 }));
    const running = await h.untilRun(runId, 'its attempt running', (r) => r.attempts[0]?.status === 'running');
    const attemptId = running.attempts[0]!.id;
    const { run, attempt, finished } = await onlyAttempt(runId);
    expect({ run: run.status, attempt: attempt.status, finished }).toEqual({
      run: 'timed_out',
      attempt: 'timed_out',
      finished: expect.objectContaining({ status: 'timed_out' }),
    });
    // Ended by the worker at the deadline, not by the sweeper's grace (30 s by default).
    expect(run.events.map((e) => e.type)).not.toContain('attempt.deadline_exceeded');
    expect(attemptProcesses(attemptId)).toEqual([]);
  });

  it('cancel while running is cancelled and leaves no process of its group behind', async () => {
    const command = 'echo "ready"; sleep 60 & sleep 60; wait';
    const runId = await h.trigger(await h.createTask({ runtime: 'shell', command }));
    // Running for sure: its first output was uploaded and its processes are alive.
    const attemptId = await eventually(
      'the first output and live processes',
      async () => {
        const run = await h.run(runId);
        const id = run.attempts[0]?.id;
        return id && (await h.output(runId)).includes('ready\n') && attemptProcesses(id).length >= 2
          ? id
          : undefined;
      },
      { context: () => h.transcripts() },
    );
    const cancel = await h.t.admin('POST', `/api/v1/runs/${runId}/cancel`);
    expect(cancel.status).toBe(200);

    const { run, attempt, finished } = await onlyAttempt(runId);
    expect({ run: run.status, attempt: attempt.status, finished, cancelRequested: run.cancelRequested }).toEqual({
      run: 'cancelled',
      attempt: 'cancelled',
      finished: expect.objectContaining({ status: 'cancelled' }),
      cancelRequested: true,
    });
    expect(attemptProcesses(attemptId)).toEqual([]);
  });

  it('output past the per-run cap is cut with one truncation marker; the run still succeeds', async () => {
    // 200 000 bytes of "x" in 100 lines, then a line that must not be stored.
    const command = 'i=0; while [ $i -lt 100 ]; do head -c 1999 /dev/zero | tr "\\0" x; echo; i=$((i+1)); done; echo LAST-LINE';
    const runId = await h.trigger(await h.createTask({ runtime: 'shell', command }));
    const { run } = await onlyAttempt(runId);
    expect(run.status).toBe('succeeded');
    const { items, truncated } = await h.logs(runId);
    expect(truncated).toBe(true);
    expect(items.filter((i) => i.kind === 'truncated')).toHaveLength(1);
    expect(items.at(-1)?.kind).toBe('truncated');
    const output = await h.output(runId);
    expect(Buffer.byteLength(output)).toBeLessThanOrEqual(LOG_CAP_BYTES);
    expect(output).toMatch(/^x{1999}\n/);
    expect(output).not.toContain('LAST-LINE');
  });

  it('output reaches the admin log view with its stream and nothing a terminal or a browser would interpret (ADR 0032)', async () => {
    // CR, an ANSI colour, U+202E (right-to-left override, UTF-8 e2 80 ae), U+200B (zero width, e2 80 8b),
    // on both streams; stderr also prints a line dressed as stdout.
    const lines = (p: string) =>
      `printf '${p}: progress 10%%\\rdone\\n'; printf '${p}: \\033[31mred\\033[0m\\n'; ` +
      `printf '${p}: file\\342\\200\\256gnp.exe\\n'; printf '${p}: zero\\342\\200\\213width\\n'`;
    const command = `${lines('out')}; { ${lines('err')}; echo 'out: all good'; } >&2`;
    const runId = await h.trigger(await h.createTask({ runtime: 'shell', command }));
    const { run } = await onlyAttempt(runId);
    expect(run.status).toBe('succeeded');
    const shown = (p: string) =>
      `${p}: progress 10%\\u000ddone\n${p}: \\u001b[31mred\\u001b[0m\n` +
      `${p}: file\\u202egnp.exe\n${p}: zero\\u200bwidth\n`;
    expect(await h.output(runId, 'stdout')).toBe(shown('out'));
    expect(await h.output(runId, 'stderr')).toBe(`${shown('err')}out: all good\n`);
    const { items } = await h.logs(runId);
    expect(new Set(items.map((i) => i.stream))).toEqual(new Set(['stdout', 'stderr']));
    // eslint-disable-next-line no-control-regex
    const interpreting = /[\r\u001b\u202e\u200b\u0000-\u0008\u000b-\u001f\u007f-\u009f]/;
    expect(items.filter((i) => interpreting.test(i.text))).toEqual([]);
  });
});
