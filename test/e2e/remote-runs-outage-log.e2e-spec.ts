/**
 * Issue 29 item 4 (second half, ADR 0038): while its control plane is down, a worker holding a run
 * logs one `lease renewal failed` line and growing summaries, not one line per 250 ms renewal tick
 * (78 lines in 20 s before). Real worker process; the plane "goes down" behind a TCP proxy that stops
 * listening (connection refused), until the lease's term ends and the run is killed.
 *
 * SQLite only: what is under test is the worker's log while nothing answers it; the plane's dialect
 * plays no part once the proxy refuses connections.
 */
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { RemoteRunHarness, eventually } from '../support/remote-run-harness';
import { TcpFaultProxy } from '../support/tcp-fault-proxy';

jest.setTimeout(180_000);

/** A 12 s term: renewals are due from its first third on, every 250 ms tick (32 of them) while none answers. */
const RUN_LEASE_MS = 12_000;

describe('renewal failures while the plane is down (sqlite)', () => {
  let h: RemoteRunHarness;

  beforeAll(async () => {
    h = await RemoteRunHarness.start('sqlite', ['outage-1'], { QL_RUN_LEASE_MS: String(RUN_LEASE_MS) });
  });
  afterAll(async () => {
    await h?.close();
  });

  it('one line and a few summaries for the whole outage, then the run killed as its term ends', async () => {
    const proxy = await TcpFaultProxy.start(h.t.plane.ingressUrl);
    try {
      const w = h.startWorker('outage-1', { env: { QL_WORKER_CONTROL_PLANE_URL: proxy.url } });
      await h.untilOnline(w);
      const markers = h.folder('outage-markers');
      mkdirSync(markers, { recursive: true });
      const started = join(markers, 'started');
      await h.trigger(await h.createTask({ runtime: 'shell', command: `touch ${started}; sleep 600` }));
      await eventually('the run started', () => (existsSync(started) ? true : undefined));
      await proxy.close(); // connection refused from now on
      await w.until(
        'the run killed at the end of its term',
        async () => w.lines.find((l) => l.msg === 'attempt ended without a completion: its lease is gone'),
        { deadlineMs: RUN_LEASE_MS + 30_000 },
      );
      const lines = w.messages().filter((m) => m.startsWith('lease renewal'));
      process.stdout.write(
        `renewal lines during a ${RUN_LEASE_MS} ms term without the plane: ${lines.length} (ceiling 6)\n`,
      );
      // Summaries 1 s, 2 s, 4 s … apart over a term of 12 s: a handful, never one per tick.
      expect(lines.length).toBeLessThanOrEqual(6);
      expect(lines.filter((m) => m === 'lease renewal failed')).toHaveLength(1);
      w.kill('SIGKILL');
      await w.exited;
    } finally {
      await proxy.close().catch(() => undefined);
    }
  });
});
