// Issue 16 item 4 with a real worker process (ADR 0035): an admin drain stops new runs on the running
// worker and a resume brings the same session back to pulling, without a restart; a disable makes the
// worker exit with code 5 (not the fenced 3 a supervisor restarts), and a start while disabled exits
// 5 at once; after enable it registers again.
import { RemoteRunHarness, eventually } from '../support/remote-run-harness';
import type { Dialect } from '../support/test-plane';
import { WORKER_EXIT } from '@ql/contracts';

// Real worker processes: a start takes seconds on a loaded machine, a run several of them.
jest.setTimeout(180_000);

describe.each<Dialect>(['sqlite', 'postgres'])(
  'worker admin states on a real worker process (%s)',
  (dialect) => {
    let h: RemoteRunHarness;

    beforeAll(async () => {
      h = await RemoteRunHarness.start(dialect, ['worker-a']);
    });
    afterAll(async () => {
      await h?.close();
    });

    it('drain keeps new runs off the running worker; resume makes the same session take them, no restart', async () => {
      const worker = h.startWorker('worker-a');
      const online = await h.untilOnline(worker);
      expect((await h.t.admin('POST', '/api/v1/workers/worker-a/drain')).status).toBe(200);
      await worker.until('the drained line', async () =>
        worker.lines.find((l) => l.msg === 'worker drained by an operator: no new runs, its runs go on'),
      );
      const runId = await h.trigger(await h.createTask({ runtime: 'shell', command: 'echo resumed' }));
      // Several heartbeats and many pulls (every 100 ms) later, the run still waits.
      const beats = () => worker.lines.filter((l) => l.msg === 'heartbeat').length;
      const seen = beats();
      await worker.until('three more heartbeats', async () => (beats() >= seen + 3 ? true : undefined));
      expect((await h.run(runId)).status).toBe('queued');

      expect((await h.t.admin('POST', '/api/v1/workers/worker-a/resume')).body).toMatchObject({
        status: 'online',
      });
      const run = await h.untilRunEnds(runId);
      expect({
        status: run.status,
        sessions: run.attempts.map((a) => (a as unknown as { sessionId: string }).sessionId),
      }).toEqual({
        status: 'succeeded',
        sessions: [online.sessionId],
      });
      // The worker learns the resume from its next heartbeat answer; its pull may take and finish the
      // run before that answer comes (the claim reads the row itself), so the line is awaited.
      await worker.until('the resumed line', async () =>
        worker.lines.find((l) => l.msg === 'worker resumed by an operator: taking runs again'),
      );
      expect(worker.running).toBe(true);
      worker.kill('SIGTERM');
      expect((await worker.exited).code).toBe(WORKER_EXIT.ok);
    });

    it('disable: the worker exits with code 5 naming enable; a start while disabled exits 5 at once; after enable it registers', async () => {
      const worker = h.startWorker('worker-a');
      await h.untilOnline(worker);
      expect((await h.t.admin('POST', '/api/v1/workers/worker-a/disable')).status).toBe(200);
      expect((await worker.exited).code).toBe(WORKER_EXIT.disabled);
      const said = (w: typeof worker) =>
        w.lines.find((l) => String(l.msg).startsWith('worker exiting: an operator disabled worker-a'));
      expect(said(worker)?.msg).toContain('POST /api/v1/workers/worker-a/enable');

      const again = h.startWorker('worker-a');
      expect((await again.exited).code).toBe(WORKER_EXIT.disabled);
      expect(said(again)?.msg).toContain('its registration was refused');

      expect((await h.t.admin('POST', '/api/v1/workers/worker-a/enable')).status).toBe(200);
      const back = h.startWorker('worker-a');
      await h.untilOnline(back);
      await eventually('worker-a online in the list', async () => {
        const res = await h.t.admin('GET', '/api/v1/workers?status=online');
        return (res.body as { items: { workerId: string }[] }).items.some((w) => w.workerId === 'worker-a')
          ? true
          : undefined;
      });
    });
  },
);
