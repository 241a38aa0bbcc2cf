/**
 * Long-poll offers end to end (ADR 0019): an idle real worker process keeps one pull held by the
 * real control plane, so a run triggered while it is idle is claimed at once — the pull interval is a
 * minute here, so polling could not explain it — and SIGTERM still drains and exits within its budget.
 */
import { WORKER_EXIT } from '../../apps/worker/src/worker-exit';
import { RemoteRunHarness, RunWorker, eventually } from '../support/remote-run-harness';
import { Dialect } from '../support/test-plane';

// Real worker processes: a start takes seconds on a loaded machine.
jest.setTimeout(180_000);

/** Queue-to-claim bound: far below the pull interval, loose for a loaded 2-core machine. */
const CLAIMED_WITHIN_MS = 3_000;

describe.each<Dialect>(['sqlite', 'postgres'])('a long-polling idle worker (%s)', (dialect) => {
  let h: RemoteRunHarness;
  let w: RunWorker;

  beforeAll(async () => {
    h = await RemoteRunHarness.start(dialect, ['worker-a'], { QL_OFFER_RECHECK_MS: '60000' });
    w = h.startWorker('worker-a', {
      env: { QL_WORKER_PULL_INTERVAL_MS: '60000', QL_WORKER_PULL_WAIT_MS: '20000' },
    });
    await h.untilOnline(w);
  });
  afterAll(async () => {
    await h?.close();
  });

  it('heartbeats go on while its pull is held: the pull has a socket of its own, outside the call chain', async () => {
    const from = (await h.worker('worker-a'))!.version;
    // 200 ms apart: ten take about two seconds, while one pull stays held for twenty.
    await eventually('ten more heartbeats', async () => {
      const now = await h.worker('worker-a');
      return now && now.version >= from + 10 ? now : undefined;
    });
    expect(w.messages()).not.toContain('heartbeat failed');
  });

  it('takes a run triggered while it is idle at once, twice in a row', async () => {
    const task = await h.createTask({ runtime: 'shell', command: 'echo long-poll' });
    for (let i = 0; i < 2; i++) {
      const runId = await h.trigger(task);
      const run = await h.untilRunEnds(runId);
      expect(run.status).toBe('succeeded');
      const at = (type: string) => Date.parse(run.events.find((e) => e.type === type)!.at);
      expect(at('attempt.claimed') - at('run.created')).toBeLessThan(CLAIMED_WITHIN_MS);
    }
  });

  it('SIGTERM ends the held pull, drains and exits within the stop budget', async () => {
    const started = Date.now();
    w.kill('SIGTERM');
    expect({ ...(await w.exited), stderr: w.stderr }).toEqual({ code: WORKER_EXIT.ok, signal: null, stderr: [] });
    expect(Date.now() - started).toBeLessThan(10_000);
    expect((await h.worker('worker-a'))?.status).toBe('offline');
  });
});
