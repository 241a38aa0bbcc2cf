/**
 * Issue 30 item 2 (ADR 0060), with real worker processes, real TLS and a real control plane: a worker
 * registers the highest protocol version it speaks (4, wire v2) unless `QL_WORKER_PROTOCOL_MAX` holds
 * it lower (3, wire v1); the session keeps the version and the worker views show it. A control plane
 * that serves none of the worker's versions (a replica with `QL_PROTOCOL_MIN=4`, sharing the database)
 * answers 400 `protocol_unsupported` naming both, and the worker exits 15, which no supervisor restarts.
 */
import { WORKER_EXIT, ingressPath } from '@ql/contracts';
import { newSessionId, registerBody } from '../support/fixtures';
import {
  FAST_PLANE_ENV,
  RemoteRunHarness,
  TERMINAL_RUN_STATUSES,
  attemptProcesses,
  eventually,
  within,
} from '../support/remote-run-harness';
import { TestPlane, readPair, startTestPlane } from '../support/test-plane';

jest.setTimeout(120_000);

interface ProtocolView {
  readonly status: string;
  readonly softwareVersion: string;
  readonly protocolVersion: number;
  readonly wireVersion: number;
}

describe('protocol negotiation, real worker processes (sqlite)', () => {
  let h: RemoteRunHarness;
  /** A second replica on the same database that serves wire v2 only. */
  let v2Only: TestPlane;
  /** A third that serves wire v1 only and reads every request as a v1 control plane did (ADR 0062 §8). */
  let v1Only: TestPlane;

  beforeAll(async () => {
    h = await RemoteRunHarness.start('sqlite', [
      'router-shanghai',
      'router-hangzhou',
      'router-suzhou',
      'router-wuxi',
    ]);
    const shared = { dialect: 'sqlite' as const, url: h.databaseUrl, dispose: async () => undefined };
    v2Only = await startTestPlane(shared, h.pki, { ...FAST_PLANE_ENV, QL_PROTOCOL_MIN: '4' });
    v1Only = await startTestPlane(shared, h.pki, { ...FAST_PLANE_ENV, QL_PROTOCOL_MAX: '3' });
  });
  afterAll(async () => {
    await v1Only?.close();
    await v2Only?.close();
    await h?.close();
  });

  /** Lines where the worker refused an answer (a v1 worker refuses any field newer than v1). */
  const refusedAnswers = (w: { transcript(): string }) =>
    w
      .transcript()
      .split('\n')
      .filter((l) => /invalid_response|unknown_field/.test(l));

  const view = async (workerId: string) =>
    (await h.t.admin('GET', `/api/v1/workers/${workerId}`)).body as ProtocolView;

  it('a current worker registers 4 (wire v2), one held by QL_WORKER_PROTOCOL_MAX=3 registers 3 (wire v1); both run a task, the views say which', async () => {
    const current = h.startWorker('router-shanghai');
    const held = h.startWorker('router-hangzhou', { env: { QL_WORKER_PROTOCOL_MAX: '3' } });
    await h.untilOnline(current);
    await h.untilOnline(held);
    expect(await view('router-shanghai')).toMatchObject({
      status: 'online',
      softwareVersion: '0.1.0',
      protocolVersion: 4,
      wireVersion: 2,
    });
    expect(await view('router-hangzhou')).toMatchObject({ protocolVersion: 3, wireVersion: 1 });
    expect(current.lines.find((l) => l.msg === 'worker registered')).toMatchObject({ protocolVersion: 4 });
    expect(held.lines.find((l) => l.msg === 'worker registered')).toMatchObject({ protocolVersion: 3 });
    // Neither stepped down: each was served the first version it offered.
    for (const w of [current, held])
      expect(w.messages()).not.toContain(
        'register refused this protocol version; registering again with the next lower one',
      );
    const list = (await h.t.admin('GET', '/api/v1/workers')).body as {
      items: (ProtocolView & { workerId: string })[];
    };
    expect(list.items.map((w) => [w.workerId, w.wireVersion]).sort()).toEqual(
      expect.arrayContaining([
        ['router-shanghai', 2],
        ['router-hangzhou', 1],
      ]),
    );
    const runs = await Promise.all(
      ['echo 上海', 'echo 杭州', 'echo 签到', 'echo 京东'].map(async (command) =>
        h.trigger(await h.createTask({ runtime: 'shell', command })),
      ),
    );
    for (const runId of runs) expect((await h.untilRunEnds(runId)).status).toBe('succeeded');
    current.kill('SIGTERM');
    held.kill('SIGTERM');
    expect((await current.exited).code).toBe(WORKER_EXIT.ok);
    expect((await held.exited).code).toBe(WORKER_EXIT.ok);
  });

  it('a worker held to 3 against a control plane serving only 4: 400 protocol_unsupported naming both, exit 15, no session', async () => {
    const w = h.startWorker('router-suzhou', {
      env: { QL_WORKER_PROTOCOL_MAX: '3', QL_WORKER_CONTROL_PLANE_URL: v2Only.plane.ingressUrl },
    });
    const exit = await within('the refused worker exits', 30_000, w.exited);
    expect(exit.code).toBe(WORKER_EXIT.protocolUnsupported);
    expect(w.transcript()).toMatch(
      /serves none of the protocol versions this worker speaks \(3\.\.3\).*offered protocol version 3.*serves 4 .*exit code 15/,
    );
    // Refused before anything was written: the worker has no session.
    expect((await h.t.admin('GET', `/api/v1/workers/${'router-suzhou'}`)).status).toBe(404);
  });

  it.each([2, 5])(
    'register with protocolVersion %p is 400 protocol_unsupported naming both, and writes nothing',
    async (offered) => {
      const creds = readPair(h.pki.workers['router-suzhou']!);
      const res = await h.t.ingress(
        creds,
        ingressPath('router-suzhou', newSessionId(), 'register'),
        registerBody({ protocolVersion: offered }),
      );
      expect(res.status).toBe(400);
      expect(res.body).toEqual({
        code: 'protocol_unsupported',
        message: expect.stringMatching(
          new RegExp(`offered protocol version ${offered} .*serves 3\\.\\.4 \\(3: wire v1, 4: wire v2\\)`),
        ),
      });
      expect((await h.t.admin('GET', '/api/v1/workers/router-suzhou')).status).toBe(404);
    },
  );

  it('a worker held to v1 runs a zoned cron task, is cancelled, uploads its output and recovers after kill -9, reading every answer as v1', async () => {
    const journalDir = h.folder('v1-journal');
    const workDir = h.folder('v1-runs');
    const held = h.startWorker('router-hangzhou', {
      env: { QL_WORKER_PROTOCOL_MAX: '3' },
      journalDir,
      workDir,
    });
    await h.untilOnline(held);
    // A time zone is v2: a v1 worker is offered the spec without it, under that spec's own digest.
    const zoned = await h.trigger(
      await h.createTask({
        runtime: 'shell',
        command: 'echo "京东签到 $QL_RUN_ID"; echo 完成 >&2',
        cron: '0 7 * * *',
        timezone: 'Asia/Shanghai',
      }),
    );
    expect((await h.untilRunEnds(zoned)).status).toBe('succeeded');
    expect(await h.output(zoned)).toContain('京东签到');
    expect(await h.output(zoned)).toContain('完成');

    // A cancel reaches a v1 worker through renew's cancelRequested (its heartbeat answers have no cancel list).
    const long = await h.trigger(await h.createTask({ runtime: 'shell', command: 'echo 开始; sleep 60' }));
    const attemptId = await eventually('the long run started', async () => {
      const id = (await h.run(long)).attempts[0]?.id;
      return id && (await h.output(long)).includes('开始') && attemptProcesses(id).length > 0
        ? id
        : undefined;
    });
    expect((await h.t.admin('POST', `/api/v1/runs/${long}/cancel`)).status).toBe(200);
    expect((await h.untilRunEnds(long)).status).toBe('cancelled');
    expect(attemptProcesses(attemptId)).toEqual([]);

    // kill -9 during a run; the next process on the same journal registers v1 again, recovers, runs.
    const crashed = await h.trigger(await h.createTask({ runtime: 'shell', command: 'echo 运行; sleep 60' }));
    await eventually('the run to crash started', async () =>
      (await h.output(crashed)).includes('运行') ? true : undefined,
    );
    held.kill('SIGKILL');
    await held.exited;
    const again = h.startWorker('router-hangzhou', {
      env: { QL_WORKER_PROTOCOL_MAX: '3' },
      journalDir,
      workDir,
    });
    await h.untilOnline(again);
    expect(await view('router-hangzhou')).toMatchObject({ protocolVersion: 3, wireVersion: 1 });
    expect(TERMINAL_RUN_STATUSES).toContain((await h.untilRunEnds(crashed)).status);
    const after = await h.trigger(await h.createTask({ runtime: 'shell', command: 'echo 恢复' }));
    expect((await h.untilRunEnds(after)).status).toBe('succeeded');
    again.kill('SIGTERM');
    expect((await again.exited).code).toBe(WORKER_EXIT.ok);
    // Every answer both processes got passed the v1 check (a newer field is invalid_response).
    expect([...refusedAnswers(held), ...refusedAnswers(again)]).toEqual([]);
  });

  it('a current worker against a control plane serving v1 only steps down to 3 and runs, cancels and logs with v1 requests only', async () => {
    const w = h.startWorker('router-wuxi', { env: { QL_WORKER_CONTROL_PLANE_URL: v1Only.plane.ingressUrl } });
    await h.untilOnline(w);
    expect(await view('router-wuxi')).toMatchObject({ protocolVersion: 3, wireVersion: 1 });
    expect(w.messages()).toContain(
      'register refused this protocol version; registering again with the next lower one',
    );
    // A short run (v1: running before the completion, output only as logs) with colours and stderr.
    const short = await h.trigger(
      await h.createTask({
        runtime: 'shell',
        command: "printf '\\033[32m签到成功\\033[0m\\n'; echo 警告 >&2",
      }),
    );
    expect((await h.untilRunEnds(short)).status).toBe('succeeded');
    // v1 took no ESC: the worker sent `?` for it, and no stream (stored as unknown).
    expect((await h.logs(short)).items.map((i) => [i.stream, i.text]).sort()).toEqual([
      ['unknown', '?[32m签到成功?[0m\n'],
      ['unknown', '警告\n'],
    ]);
    const long = await h.trigger(await h.createTask({ runtime: 'shell', command: 'echo 开始; sleep 60' }));
    await eventually('the long run started', async () =>
      (await h.output(long)).includes('开始') ? true : undefined,
    );
    expect((await h.t.admin('POST', `/api/v1/runs/${long}/cancel`)).status).toBe(200);
    expect((await h.untilRunEnds(long)).status).toBe('cancelled');
    w.kill('SIGTERM');
    expect((await w.exited).code).toBe(WORKER_EXIT.ok);
    // Not one request refused by the v1 reading, not one answer refused by the worker's v1 check.
    expect(w.transcript()).not.toMatch(/invalid_worker_request|unknown_field|control_character/);
    expect(refusedAnswers(w)).toEqual([]);
  });
});
