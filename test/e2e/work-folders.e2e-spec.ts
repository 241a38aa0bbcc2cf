/**
 * Issue 16 item 12, ADR 0038: a worker's work folders do not pile up. Real worker processes on a real
 * control plane: succeeded runs leave nothing in QL_WORKER_WORK_DIR; failed runs keep their folders
 * only within QL_WORKER_KEEP_FAILED_RUNS and QL_WORKER_KEEP_FAILED_BYTES, the oldest removed first; a
 * restarted worker applies the bound to what its predecessor kept; and a task running as `nobody`
 * (root worker with only the deployed capabilities: no CAP_DAC_OVERRIDE or CAP_FOWNER) that leaves a
 * 0700 and a 0500 folder of its own still has its folder removed.
 */
import { chmodSync, readdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { RemoteRunHarness, RunWorker, eventually } from '../support/remote-run-harness';
import { DEPLOYED_CAPS } from '../support/run-as-launcher';

// Real worker processes: a start takes seconds on a loaded machine, a run several of them.
jest.setTimeout(180_000);

describe('work folders are removed when their attempt ends (failed ones kept within a bound)', () => {
  let h: RemoteRunHarness;

  beforeAll(async () => {
    h = await RemoteRunHarness.start('sqlite', ['worker-a', 'worker-b', 'worker-n']);
    // As /var/lib: the task user may pass through the folders above the work root.
    chmodSync(dirname(h.folder('x')), 0o711);
  });
  afterEach(async () => {
    await h.stopWorkers();
  });
  afterAll(async () => {
    await h?.close();
  });

  const folders = (w: RunWorker) => readdirSync(w.workDir).sort();
  /** Runs `command` once to its end; returns its status and the name of its work folder (it prints it). */
  async function runOnce(command: string): Promise<{ status: string; folder: string }> {
    const runId = await h.trigger(await h.createTask({ runtime: 'shell', command }));
    const run = await h.untilRunEnds(runId);
    const folder = /FOLDER (\S+)/.exec(await h.output(runId))?.[1];
    if (!folder) throw new Error(`no FOLDER line: ${JSON.stringify(run)}\n${h.transcripts()}`);
    return { status: run.status, folder };
  }
  const untilFolders = (w: RunWorker, expected: string[]) =>
    eventually(
      `work folders ${JSON.stringify(expected)}`,
      () => (JSON.stringify(folders(w)) === JSON.stringify([...expected].sort()) ? true : undefined),
      { context: () => `${JSON.stringify(folders(w))}\n${h.transcripts()}` },
    );
  const removalWarnings = (w: RunWorker) =>
    w.lines.filter((l) => String(l.msg).startsWith('could not remove a work folder'));

  it('after several succeeded runs the work folder root is empty', async () => {
    const w = h.startWorker('worker-a');
    await h.untilOnline(w);
    for (let i = 0; i < 4; i++) {
      const run = await runOnce(
        'echo "FOLDER $(basename "$PWD")"; mkdir -p sub/deeper; echo data > sub/deeper/f',
      );
      expect(run.status).toBe('succeeded');
    }
    await untilFolders(w, []);
    expect(removalWarnings(w)).toEqual([]);
  });

  it('failed runs keep the newest folders within the count and the byte bound; a restarted worker applies a lower bound to what was kept', async () => {
    const env = { QL_WORKER_KEEP_FAILED_RUNS: '3', QL_WORKER_KEEP_FAILED_BYTES: '1500000' };
    const w = h.startWorker('worker-b', { env });
    await h.untilOnline(w);
    const big = 'echo "FOLDER $(basename "$PWD")"; head -c 600000 /dev/zero > blob; exit 3';
    const small = 'echo "FOLDER $(basename "$PWD")"; exit 3';

    const f1 = await runOnce(big);
    const f2 = await runOnce(big);
    const f3 = await runOnce(big);
    expect([f1, f2, f3].map((r) => r.status)).toEqual(['failed', 'failed', 'failed']);
    // 3 × 600 kB is past the 1.5 MB bound: the oldest goes.
    await untilFolders(w, [f2.folder, f3.folder]);

    const f4 = await runOnce(small);
    const f5 = await runOnce(small);
    // Three at most: the oldest (f2) goes.
    await untilFolders(w, [f3.folder, f4.folder, f5.folder]);
    expect(removalWarnings(w)).toEqual([]);

    // The same journal and work folder, a lower bound: the restart sweep keeps the newest one only.
    w.kill('SIGTERM');
    await w.exited;
    const again = h.startWorker('worker-b', {
      env: { ...env, QL_WORKER_KEEP_FAILED_RUNS: '1' },
      journalDir: w.journalDir,
      workDir: w.workDir,
    });
    await h.untilOnline(again);
    await untilFolders(again, [f5.folder]);
  });

  it('as nobody, a task that leaves a 0700 and a 0500 folder of its own still has its folder removed (the worker has CAP_CHOWN, no CAP_DAC_OVERRIDE)', async () => {
    expect({ testsRunAs: process.getuid!() }).toEqual({ testsRunAs: 0 }); // switching users needs root
    const w = h.startWorker('worker-n', {
      env: { QL_WORKER_RUN_AS: 'nobody', QL_WORKER_KEEP_FAILED_RUNS: '0' },
      launcher: DEPLOYED_CAPS,
    });
    await h.untilOnline(w);
    const walls =
      'mkdir -m 700 private && mkdir -p private/inner && echo secret > private/inner/f && chmod 700 private/inner; mkdir ro && echo x > ro/f && chmod 500 ro';
    const ok = await runOnce(`echo "FOLDER $(basename "$PWD")"; ${walls}`);
    expect(ok.status).toBe('succeeded');
    const failed = await runOnce(`echo "FOLDER $(basename "$PWD")"; ${walls}; exit 1`);
    expect(failed.status).toBe('failed');
    await untilFolders(w, []);
    expect(removalWarnings(w)).toEqual([]);
  });
});
