/**
 * SIGTERM with a run going (R-WRK-5): inside the stop budget the worker drains (takes nothing new),
 * lets the run finish and report, goes offline and exits 0; a run that would outlast the budget is
 * cancelled late in it (SIGTERM, SIGKILL after the grace) and reported `cancelled` by the stop while
 * its lease is live, and the worker still goes offline and exits 0, leaving no process of the run
 * behind (issue 29 item 4). A stop whose reports get no answer is the worker's unit tests' case.
 *
 * SQLite only: the control plane's side (drain, offline, completion) is covered on both dialects by
 * the ingress e2e tests; what this file tests is the worker process's stop sequence.
 */
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { WORKER_EXIT } from '@ql/contracts';
import { RemoteRunHarness, attemptProcesses, eventually, finishedEvent } from '../support/remote-run-harness';

// Real worker processes: a start takes seconds on a loaded machine, a run several of them.
jest.setTimeout(180_000);

describe('SIGTERM to a worker with a running task (sqlite)', () => {
  let h: RemoteRunHarness;

  beforeAll(async () => {
    h = await RemoteRunHarness.start('sqlite', ['worker-a', 'worker-b']);
  });
  afterAll(async () => {
    await h?.close();
  });

  /** Triggers a run of a new task and waits until its first output line arrived: it is running. */
  const runningTask = async (command: string) => {
    const runId = await h.trigger(await h.createTask({ runtime: 'shell', command }));
    const attemptId = await eventually(
      'the first output of the run',
      async () =>
        (await h.output(runId)).includes('begun\n') ? (await h.run(runId)).attempts[0]?.id : undefined,
      { context: () => h.transcripts() },
    );
    return { runId, attemptId };
  };

  it('inside the budget: drains, the run finishes and is reported, offline, exit 0', async () => {
    const w = h.startWorker('worker-a', { env: { QL_WORKER_STOP_BUDGET_MS: '20000' } });
    await h.untilOnline(w);
    const { runId } = await runningTask('echo begun; sleep 2; echo finished');
    // Its only slot is taken: this one stays queued, and the draining worker must not take it later.
    const waiting = await h.trigger(await h.createTask({ runtime: 'shell', command: 'echo never' }));

    w.kill('SIGTERM');
    expect({ ...(await w.exited), stderr: w.stderr }).toEqual({
      code: WORKER_EXIT.ok,
      signal: null,
      stderr: [],
    });
    // Read at once after the exit: the completion was reported before the worker went away.
    const run = await h.run(runId);
    expect({ run: run.status, attempts: run.attempts.map((a) => a.status) }).toEqual({
      run: 'succeeded',
      attempts: ['succeeded'],
    });
    expect(await h.output(runId)).toContain('finished\n');
    expect((await h.worker('worker-a'))?.status).toBe('offline');
    expect(await h.run(waiting)).toMatchObject({ status: 'queued', attempts: [] });
    const messages = w.messages();
    expect(messages.indexOf('worker draining')).toBeGreaterThan(-1);
    expect(messages.indexOf('worker draining')).toBeLessThan(messages.indexOf('worker offline'));
    expect((await h.t.admin('POST', `/api/v1/runs/${waiting}/cancel`)).status).toBe(200);
  });

  it('a run that would outlast the budget: cancelled (SIGTERM, then SIGKILL), reported cancelled by the stop while its lease is live, offline, exit 0', async () => {
    // Budget 4 s, kill grace 500 ms: the run is cancelled 2 s in, SIGKILLed 500 ms later if still
    // there, and 1.5 s stays for its completion and offline, over real TLS (issue 29 item 4).
    const w = h.startWorker('worker-b', { env: { QL_WORKER_STOP_BUDGET_MS: '4000' } });
    await h.untilOnline(w);
    const markers = h.folder('stop-markers');
    mkdirSync(markers, { recursive: true });
    const terminated = join(markers, 'terminated');
    // The task's own SIGTERM handler leaves a marker; its background sleep is in the same group.
    const command = `trap 'touch ${terminated}; exit 143' TERM; echo begun; sleep 40 & wait`;
    const name = '每日备份';
    const runId = await h.trigger(await h.createTask({ runtime: 'shell', command, name }));
    const attemptId = await eventually(
      'the first output of the run',
      async () =>
        (await h.output(runId)).includes('begun\n') ? (await h.run(runId)).attempts[0]?.id : undefined,
      { context: () => h.transcripts() },
    );
    expect(attemptProcesses(attemptId!).length).toBeGreaterThan(0);

    const stopped = Date.now();
    w.kill('SIGTERM');
    expect({ ...(await w.exited), stderr: w.stderr }).toEqual({
      code: WORKER_EXIT.ok,
      signal: null,
      stderr: [],
    });
    const took = Date.now() - stopped;
    // Read at once after the exit: cancelled by the worker's report, not lost by its lease's expiry.
    const run = await h.run(runId);
    expect({
      run: run.status,
      attempts: run.attempts.map((a) => ({ status: a.status, errorSummary: a.errorSummary })),
    }).toEqual({
      run: 'cancelled',
      attempts: [
        {
          status: 'cancelled',
          errorSummary: 'killed because its worker was stopped before the run ended (worker_shutdown)',
        },
      ],
    });
    expect(run.events.map((e) => e.type)).not.toContain('attempt.lease_expired');
    expect(finishedEvent(run, attemptId!)?.detail).toMatchObject({
      status: 'cancelled',
      reported: 'cancelled',
    });
    expect(existsSync(terminated)).toBe(true); // it got its SIGTERM first
    expect(attemptProcesses(attemptId!)).toEqual([]);
    expect((await h.worker('worker-b'))?.status).toBe('offline');
    expect(w.lines.find((l) => String(l.msg).startsWith('stopping: cancelled run'))).toMatchObject({
      level: 'warn',
      msg: `stopping: cancelled run ${runId} (${name}): it would outlast the worker's stop budget; SIGTERM now, SIGKILL after 500 ms, reported cancelled (worker_shutdown)`,
    });
    expect(w.lines.filter((l) => l.level === 'error')).toEqual([]);
    process.stdout.write(`SIGTERM to exit with a run cancelled by the stop: ${took} ms (budget 4000)\n`);
  });
});
