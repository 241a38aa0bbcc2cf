/**
 * Issue 15 item 8, ADR 0029: one journal folder, two worker processes in two PID namespaces (two
 * containers on one volume). The second must refuse the journal while its owner lives — frozen by
 * SIGSTOP too — because the owner holds a kernel lock on it; a pid read from `journal.lock` is
 * meaningless across namespaces (before ADR 0029 the second judged it dead and took the journal, its
 * session replacing the live worker's). Once the owner is killed, the kernel lock is gone and a new
 * worker (in its own namespace again) takes the journal over.
 *
 * Needs root: `unshare --pid --fork --mount-proc` creates the PID namespace (the test environment runs
 * as root; elsewhere this file fails at once saying so, it does not skip).
 */
import { WORKER_EXIT } from '@ql/contracts';
import { RemoteRunHarness, RunWorker } from '../support/remote-run-harness';

// Real worker processes: a start takes seconds on a loaded machine.
jest.setTimeout(180_000);

/** A PID namespace of its own, with its own /proc; `--kill-child`: killing unshare kills the worker. */
const OWN_PID_NAMESPACE = ['unshare', '--pid', '--fork', '--mount-proc', '--kill-child'];

describe('journal lock across PID namespaces (ADR 0029)', () => {
  let h: RemoteRunHarness;

  beforeAll(async () => {
    if (process.getuid?.() !== 0) {
      throw new Error('this test needs root: it creates PID namespaces with unshare --pid (run it as root)');
    }
    // A long session lease: the owner stays frozen while a whole worker process starts beside it.
    h = await RemoteRunHarness.start('sqlite', ['worker-a'], { QL_SESSION_LEASE_MS: '120000' });
  });
  afterAll(async () => {
    await h?.close();
  });

  /** A worker on `journalDir` in a PID namespace of its own. */
  const inOwnNamespace = (journalDir?: string): RunWorker =>
    h.startWorker('worker-a', { launcher: OWN_PID_NAMESPACE, ...(journalDir ? { journalDir } : {}) });

  /** The second process exits 4 with the refusal line, never registers; the owner keeps its session. */
  const expectRefused = async (owner: RunWorker, journalDir: string, sessionId: string) => {
    const second = inOwnNamespace(journalDir);
    // Whichever comes first: its exit, or its registration (the journal taken: the bug).
    const first = await second.until(
      'its exit or its registration',
      async () =>
        !second.running ? 'exited' : second.session() ? `registered ${second.session()}` : undefined,
      { deadlineMs: 60_000 },
    );
    expect(first).toBe('exited');
    expect(await second.exited).toEqual({ code: WORKER_EXIT.journalLocked, signal: null });
    const refusal = second.lines.find(
      (l) => l.msg === 'worker refused to start: its journal folder is in use',
    );
    expect(refusal?.error).toMatch(
      new RegExp(
        `journal ${journalDir} is in use by worker worker-a \\(pid ${owner.pid} on boot [0-9a-f-]+, since .*\\): ` +
          'a live process holds its kernel lock \\(journal.lock.sqlite\\); each worker process needs its own QL_WORKER_JOURNAL_DIR',
      ),
    );
    expect(second.session()).toBeUndefined();
    expect((await h.worker('worker-a'))?.sessionId).toBe(sessionId);
  };

  it('a second worker in another PID namespace refuses a live or frozen owner, and takes over a dead one', async () => {
    const owner = h.startWorker('worker-a');
    const first = await h.untilOnline(owner);

    // Live owner: the namespaced worker reads a pid that does not exist in its namespace, and refuses anyway.
    await expectRefused(owner, owner.journalDir, first.sessionId);

    // Frozen owner (SIGSTOP): the kernel keeps its lock.
    owner.kill('SIGSTOP');
    try {
      await expectRefused(owner, owner.journalDir, first.sessionId);
    } finally {
      owner.kill('SIGCONT');
    }
    // The owner goes on with the same session (heartbeats land again).
    const from = (await h.worker('worker-a'))!.version;
    await owner.until('heartbeats after SIGCONT', async () => {
      const view = await h.worker('worker-a');
      return view && view.sessionId === first.sessionId && view.version > from ? view : undefined;
    });
    expect(owner.running).toBe(true);

    // Dead owner (SIGKILL, its journal.lock left behind): the kernel released its lock.
    owner.kill('SIGKILL');
    await owner.exited;
    const next = inOwnNamespace(owner.journalDir);
    const taken = await h.untilOnline(next);
    expect(taken.sessionId).not.toBe(first.sessionId);
    expect(taken.generation).toBe(first.generation + 1);
    await h.stopWorkers();
  });
});
