/**
 * SIGTERM with a run going (R-WRK-5): inside the stop budget the worker drains (takes nothing new),
 * lets the run finish and report, goes offline and exits 0; past the budget it exits non-zero, says
 * why, and leaves no process of the run behind.
 *
 * SQLite only: the control plane's side (drain, offline, completion) is covered on both dialects by
 * the ingress e2e tests; what this file tests is the worker process's stop sequence.
 */
import { WORKER_EXIT } from '../../apps/worker/src/worker-exit';
import { RemoteRunHarness, attemptProcesses, eventually } from '../support/remote-run-harness';

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
      async () => ((await h.output(runId)).includes('begun\n') ? (await h.run(runId)).attempts[0]?.id : undefined),
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
    expect({ ...(await w.exited), stderr: w.stderr }).toEqual({ code: WORKER_EXIT.ok, signal: null, stderr: [] });
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

  it('past the budget: exits non-zero with an error line that says why, and no process of the run is left', async () => {
    const w = h.startWorker('worker-b', {
      env: { QL_WORKER_STOP_BUDGET_MS: '1500', QL_WORKER_REQUEST_TIMEOUT_MS: '1000' },
    });
    await h.untilOnline(w);
    const { attemptId } = await runningTask('echo begun; sleep 60 & sleep 60; wait');
    expect(attemptProcesses(attemptId!).length).toBeGreaterThan(0);

    w.kill('SIGTERM');
    expect(await w.exited).toEqual({ code: WORKER_EXIT.failed, signal: null });
    const why = w.lines.filter((l) => l.level === 'error').map((l) => String(l.msg));
    expect(why).toEqual([expect.stringMatching(/budget/i)]);
    expect(attemptProcesses(attemptId!)).toEqual([]);
  });
});
