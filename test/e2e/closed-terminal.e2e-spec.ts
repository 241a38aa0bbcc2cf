/**
 * Issue 16 item 1 (ADR 0034): closing the terminal stops the stack in order instead of crashing it.
 * A closed terminal sends SIGHUP and fails every later write with EIO (a closed pipe: EPIPE); the
 * worker must still drain, go offline and exit 0, with its run finished, not left `running`.
 */
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { RemoteRunHarness, RunWorker, WorkerView } from '../support/remote-run-harness';
import { EntryPoint, QUICKSTART, ROOT, freePort, tempDir } from '../support/entry-points';

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

describe('the quickstart (npm start) on a pipe that closes', () => {
  let dir: string;
  beforeAll(() => {
    dir = tempDir('ql-quickstart-hup-');
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('prints its connection banner near the top (issue 16 item 14), then on SIGHUP with its output closed stops everything, exit 0', async () => {
    const q = new EntryPoint(QUICKSTART, {
      QL_ADMIN_PORT: String(await freePort()),
      QL_INGRESS_PORT: String(await freePort()),
      QL_DATABASE_URL: `sqlite:${join(dir, 'ql.sqlite')}`,
      QL_DEV_PKI_DIR: join(dir, 'pki'),
    });
    await q.until('worker-1 registered', async () => q.lines.find((l) => l.msg === 'worker registered'), {
      deadlineMs: 60_000,
    });
    // The default log level (info): Nest's start-up narration (modules, 60 mapped routes) is debug.
    const banner = q.messages().findIndex((m) => m.includes('Admin API + probes'));
    expect(banner).toBeGreaterThan(0);
    expect(banner).toBeLessThanOrEqual(5);
    expect(q.lines.filter((l) => l.context === 'RouterExplorer')).toEqual([]);

    q.closeOutput(); // the quickstart's and its children's output: EPIPE from now on
    q.kill('SIGHUP');
    expect(await q.exited).toEqual({ code: 0, signal: null });
    const db = new Database(join(dir, 'ql.sqlite'), { readonly: true, fileMustExist: true });
    try {
      expect(db.prepare(`SELECT status FROM workers WHERE worker_id = 'worker-1'`).get()).toEqual({
        status: 'offline',
      });
    } finally {
      db.close();
    }
  });
});
