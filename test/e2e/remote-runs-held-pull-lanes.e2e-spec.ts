/**
 * ADR 0019 with a run going: a worker with a free slot keeps its next pull held by the control plane,
 * on a socket of its own and outside its call chain, so its run's `running` report and its lease
 * renewals are answered while that pull is still held — not up to QL_WORKER_PULL_WAIT_MS (20 s)
 * later. A report had a quickstart run sit in `starting` about 20 s after its process started, only
 * without debug logging: the worker runs here at `info` (the quickstart's level) and at `debug`
 * (every other process test's). The order is read on the control plane's ingress listener — when
 * each call of the worker arrived and when it was answered — never from a wall-clock bound.
 *
 * SQLite only: the lanes are the worker's; the database plays no part in them.
 */
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { WORKER_EXIT } from '@ql/contracts';
import { RemoteRunHarness, eventually } from '../support/remote-run-harness';

// Real worker processes: a start takes seconds on a loaded machine.
jest.setTimeout(120_000);

/** One ingress call of a worker, as the control plane's listener saw it (ticks of one counter). */
interface WireCall {
  readonly workerId: string;
  readonly action: string;
  readonly arrived: number;
  answered?: number;
}

/** Every session call that reaches `server` from now on: its arrival and the end of its answer, in order. */
function recordIngressCalls(server: Server): { readonly calls: WireCall[]; stop(): void } {
  let tick = 0;
  const calls: WireCall[] = [];
  const onRequest = (req: IncomingMessage, res: ServerResponse) => {
    const route = /\/workers\/([^/]+)\/sessions\/[^/]+\/([a-z-]+)$/.exec(req.url ?? '');
    if (!route) return;
    const call: WireCall = { workerId: decodeURIComponent(route[1]!), action: route[2]!, arrived: ++tick };
    calls.push(call);
    res.once('finish', () => (call.answered = ++tick));
  };
  server.on('request', onRequest);
  return { calls, stop: () => server.off('request', onRequest) };
}

describe('a worker with a free slot holds its next pull while its run reports (ADR 0019)', () => {
  let h: RemoteRunHarness;
  let wire: ReturnType<typeof recordIngressCalls>;

  beforeAll(async () => {
    // FAST_PLANE_ENV: a 5 s run lease, renewed about every 1.7 s — a renewal that waited for a held
    // pull (20 s) would lose it.
    h = await RemoteRunHarness.start('sqlite', ['worker-a', 'worker-b']);
    wire = recordIngressCalls(h.t.plane.ingress.getHttpServer() as Server);
  });
  afterAll(async () => {
    wire?.stop();
    await h?.close();
  });

  it.each([
    ['info', 'worker-a'],
    ['debug', 'worker-b'],
  ])(
    'at the %s log level: `running`, its output, two renewals and its completion are answered while the pull sent after the offer is held',
    async (level, workerId) => {
      const w = h.startWorker(workerId, {
        env: {
          QL_WORKER_LOG_LEVEL: level,
          // Each case's run goes to its own worker, whatever the other case left behind.
          QL_WORKER_LABELS: `loglevel=${level}`,
          QL_WORKER_MAX_CONCURRENT_RUNS: '2',
          QL_WORKER_PULL_WAIT_MS: '20000',
          // No pull by the interval within this test: after the offer, the next pull goes at once.
          QL_WORKER_PULL_INTERVAL_MS: '60000',
        },
      });
      await h.untilOnline(w);
      const task = await h.createTask({
        name: `京东签到 长任务 ${level}`,
        runtime: 'shell',
        command: 'echo 京东签到开始; sleep 120',
        placement: { required: { labels: { loglevel: level } } },
      });
      const runId = await h.trigger(task);
      const mine = (action: string) =>
        wire.calls.filter((c) => c.workerId === workerId && c.action === action);
      const answered = (action: string) => mine(action).filter((c) => c.answered !== undefined);

      // Until `running` came or the lease ran out (a renewal that waited would lose the 5 s lease).
      const run = await h.untilRun(
        runId,
        'its attempt running, or its lease gone',
        (r) =>
          r.attempts[0]?.status === 'running' || r.events.some((e) => e.type === 'attempt.lease_expired'),
      );
      expect({ status: run.attempts[0]?.status, workerId: run.attempts[0]?.workerId }).toEqual({
        status: 'running',
        workerId,
      });
      // Its output and two renewals of its 5 s lease; then a cancel, reported by the completion.
      await eventually(
        `${workerId}: its output uploaded and its lease renewed twice`,
        () => (answered('logs').length >= 1 && answered('renew').length >= 2 ? true : undefined),
        { pollMs: 50, context: () => h.transcripts() },
      );
      expect((await h.t.admin('POST', `/api/v1/runs/${runId}/cancel`)).status).toBe(200);
      expect((await h.untilRunEnds(runId)).status).toBe('cancelled');
      await eventually(`${workerId}: the completion answered`, () =>
        answered('completion').length === 1 ? true : undefined,
      );

      // Each report of the run was answered while one and the same pull was held: it arrived before
      // `running` did and was still unanswered when the completion was answered.
      const reports = ['running', 'logs', 'renew', 'completion'].flatMap(answered);
      const heldThrough = (call: WireCall) =>
        mine('offers').filter(
          (pull) => pull.arrived < call.arrived && (pull.answered ?? Infinity) > call.answered!,
        );
      const pull = heldThrough(answered('running')[0]!);
      expect(reports.map((c) => ({ action: c.action, heldPulls: heldThrough(c) }))).toEqual(
        reports.map((c) => ({ action: c.action, heldPulls: pull })),
      );
      expect(answered('running')).toHaveLength(1);
      expect(pull).toHaveLength(1);

      w.kill('SIGTERM');
      expect({ ...(await w.exited), stderr: w.stderr }).toEqual({
        code: WORKER_EXIT.ok,
        signal: null,
        stderr: [],
      });
    },
  );
});
