/**
 * R-PROF-3, second half: a started, idle worker (registered, nothing to run) holds exactly its timers —
 * one per loop, unref'd, none of them piling up — and the only thing that keeps its process alive is
 * the entry point's own hold. Seen from inside the real worker process by a preloaded probe
 * (test/support/held-handles-probe.js) that tracks every timer, socket and child process.
 */
import { join } from 'node:path';
import { LogLine } from '../support/child-process';
import { ROOT } from '../support/entry-points';
import { RemoteRunHarness, RunWorker, WORKER_REQUEST_TIMEOUT_MS, eventually } from '../support/remote-run-harness';

// Real worker processes: a start takes seconds on a loaded machine, a run several of them.
jest.setTimeout(180_000);

interface Probe extends LogLine {
  timers: { delayMs: number; ref: boolean }[];
  sockets: number;
  children: number;
  refed: string[];
}

const HEARTBEAT_MS = 400;
const PULL_MS = 300;
/** main.ts holds the process open with one ref'd timer of the longest delay Node allows. */
const HOLD_OPEN_MS = 2 ** 31 - 1;

describe('a started idle worker (R-PROF-3)', () => {
  let h: RemoteRunHarness;
  let w: RunWorker;

  beforeAll(async () => {
    h = await RemoteRunHarness.start('sqlite', ['worker-a']);
    w = h.startWorker('worker-a', {
      env: {
        NODE_OPTIONS: `--require ${join(ROOT, 'test', 'support', 'held-handles-probe.js')}`,
        QL_WORKER_HEARTBEAT_MS: String(HEARTBEAT_MS),
        QL_WORKER_PULL_INTERVAL_MS: String(PULL_MS),
        // The polling picture (a long-poll pull is always in flight, with its deadline timer).
        QL_WORKER_PULL_WAIT_MS: '0',
        // The reaper `sh` outlives a run this long (2000 by default); five heartbeats are well past it.
        QL_WORKER_REAPER_LINGER_MS: '200',
        QL_WORKER_LOG_LEVEL: 'info',
      },
    });
    await h.untilOnline(w);
  });
  afterAll(async () => {
    await h?.close();
  });

  /** Asks the worker for a probe line and waits for it. */
  const probe = async (): Promise<Probe> => {
    const seen = w.lines.length;
    w.kill('SIGUSR2');
    return w.until('the probe line', async () =>
      w.lines.slice(seen).find((l): l is Probe => l.msg === 'held handles probe'),
    );
  };

  /**
   * A probe may land mid-cycle: a loop whose cycle is running has no timer armed, and a call in
   * flight has its deadline timer. The idle picture is a probe with both loops armed and no call in
   * flight; one comes within a few probes (a loop that never re-arms fails at the deadline).
   */
  const idleProbe = () =>
    eventually('a probe between two cycles', async () => {
      const p = await probe();
      const armed = (ms: number) => p.timers.some((t) => t.delayMs === ms);
      return armed(PULL_MS) && armed(HEARTBEAT_MS) && !armed(WORKER_REQUEST_TIMEOUT_MS) ? p : undefined;
    });
  const expectOnlyItsTimers = (p: Probe) => {
    expect(p.timers).toEqual([
      { delayMs: PULL_MS, ref: false },
      { delayMs: HEARTBEAT_MS, ref: false },
      { delayMs: HOLD_OPEN_MS, ref: true },
    ]);
    expect(p.children).toBe(0);
    expect(p.refed.filter((r) => r === 'Timeout')).toEqual(['Timeout']);
  };

  /** Several heartbeat (and pull) cycles from now: a leak would have piled up by then. */
  const fiveHeartbeats = async () => {
    const from = (await h.worker('worker-a'))!.version;
    await eventually('five more heartbeats', async () => {
      const now = await h.worker('worker-a');
      return now && now.version >= from + 5 ? now : undefined;
    });
  };

  it("holds one unref'd timer per loop and the entry point's hold, and nothing piles up over cycles", async () => {
    await fiveHeartbeats();
    expectOnlyItsTimers(await idleProbe());
  });

  it('after a run ended it holds just those again: no renewal, kill or deadline timer, no child', async () => {
    const runId = await h.trigger(await h.createTask({ runtime: 'shell', command: 'echo "one run"; sleep 1' }));
    expect((await h.untilRunEnds(runId)).status).toBe('succeeded');
    await fiveHeartbeats();
    expectOnlyItsTimers(await idleProbe());
  });
});
