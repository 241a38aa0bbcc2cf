/**
 * Issue 16 item 1 (ADR 0034): closing the terminal stops the stack in order instead of crashing it.
 * A closed terminal sends SIGHUP and fails every later write with EIO (a closed pipe: EPIPE); the
 * worker must still drain, go offline and exit 0, with its run finished, not left `running`.
 */
import { join } from 'node:path';
import { RemoteRunHarness, RunWorker, WorkerView } from '../support/remote-run-harness';
import { ROOT } from '../support/entry-points';

const PTY = ['python3', join(ROOT, 'test', 'support', 'pty-launcher.py')];

describe('a worker whose terminal or output pipe closes during a run', () => {
  let h: RemoteRunHarness;
  beforeAll(async () => {
    h = await RemoteRunHarness.start('sqlite', ['worker-pipe', 'worker-pty']);
  });
  afterAll(async () => h?.close());

  /** A run of `sleep` going on `w` (its attempt running), for the hangup to land in. */
  async function runGoingOn(w: RunWorker): Promise<string> {
    await h.untilOnline(w);
    const task = await h.createTask({ command: 'sleep 1; echo finished', runtime: 'shell' });
    const runId = await h.trigger(task);
    await h.untilRun(runId, 'running', (r) => r.status === 'running');
    return runId;
  }

  async function expectStoppedInOrder(w: RunWorker, runId: string): Promise<void> {
    // The exit code is the worker's (through the pty launcher: 128 + signal if a signal killed it).
    expect({ exit: await w.exited, stderr: w.stderr }).toEqual({
      exit: { code: 0, signal: null },
      stderr: [],
    });
    const view = (await h.worker(w.workerId)) as WorkerView;
    expect(view.status).toBe('offline');
    const run = await h.run(runId);
    expect(run.status).toBe('succeeded');
    expect(await h.output(runId, 'stdout')).toBe('finished\n');
  }

  it('its stdout/stderr pipe closed, then SIGHUP: the run finishes, the worker goes offline, exit 0', async () => {
    const w = h.startWorker('worker-pipe');
    const runId = await runGoingOn(w);
    w.closeOutput(); // every line it writes from now on fails with EPIPE
    w.kill('SIGHUP');
    await expectStoppedInOrder(w, runId);
  });

  it('on a terminal that is closed (the kernel hangs it up: SIGHUP, then EIO): the same, and no abort at exit', async () => {
    const w = h.startWorker('worker-pty', { launcher: PTY });
    const runId = await runGoingOn(w);
    w.kill('SIGUSR1'); // the launcher closes the terminal
    await expectStoppedInOrder(w, runId);
  });
});
