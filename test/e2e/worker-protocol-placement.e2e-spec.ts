/**
 * Issue 30 item 2 (ADR 0062), with real worker processes on both dialects: placement reads the
 * worker session's wire and software versions. A secret global env var puts `secretEnv` (wire v2) in
 * every run's spec, so its runs need a v2 session: a worker held to v1 beside it is never offered one
 * (it could not read it) and the run waits, saying why, until a current worker takes it. With the
 * variable disabled the v1 worker runs tasks again. `required.workerVersion` keeps a run from older
 * workers and is never offered (no published wire version has it). `/metrics` counts live workers by
 * software and protocol version.
 */
import { randomBytes } from 'node:crypto';
import { WORKER_EXIT } from '@ql/contracts';
import { RemoteRunHarness, RunWorker, eventually } from '../support/remote-run-harness';
import type { Dialect } from '../support/test-plane';

jest.setTimeout(180_000);

const COOKIE = 'pt_key=AAJ京东-cookie-value;pt_pin=jd_user';

interface Pending {
  readonly considered: number;
  readonly matching: number;
  readonly reasons: Record<string, number>;
}
interface RunDetail {
  readonly status: string;
  readonly placement: { required: Record<string, unknown> };
  readonly pending: Pending | null;
  readonly attempts: { workerId: string }[];
}

describe.each<Dialect>(['sqlite', 'postgres'])('placement by wire and worker version (%s)', (dialect) => {
  let h: RemoteRunHarness;
  let held: RunWorker;

  beforeAll(async () => {
    h = await RemoteRunHarness.start(dialect, ['router-v1', 'router-v2'], {
      QL_SECRETS_KEY: randomBytes(32).toString('base64'),
      // A held pull answers `idle` (counted by reason) at the end of its hold: short holds here.
      QL_OFFER_WAIT_MAX_MS: '500',
    });
    held = h.startWorker('router-v1', { env: { QL_WORKER_PROTOCOL_MAX: '3' } });
    await h.untilOnline(held);
  });
  afterAll(async () => {
    await h?.close();
  });

  const detail = async (runId: string) => (await h.t.admin('GET', `/api/v1/runs/${runId}`)).body as RunDetail;
  const claimsIdle = async (reason: string) => {
    const text = (await h.t.admin('GET', '/metrics')).raw;
    const line = text
      .split('\n')
      .find((l) => l.startsWith(`ql_claims_total{outcome="idle",reason="${reason}"}`));
    return line ? Number(line.split(' ').pop()) : 0;
  };
  /** Lines where a worker refused an answer (a v1 worker refuses any field newer than v1). */
  const refusedAnswers = (w: RunWorker) =>
    w
      .transcript()
      .split('\n')
      .filter((l) => /invalid_response|unknown_field/.test(l));

  it('with a secret global env var, a v1 worker is never offered a run (it waits, saying wire_version) until a current worker takes it', async () => {
    const created = await h.t.admin('POST', '/api/v1/env-vars', {
      name: 'JD_COOKIE',
      value: COOKIE,
      secret: true,
      remark: '京东账号',
    });
    expect(created.status).toBe(201);
    const taskId = await h.createTask({
      runtime: 'node',
      command: 'console.log("签到 " + process.env.JD_COOKIE)',
    });
    const idleBefore = await claimsIdle('no_matching_run');
    const runId = await h.trigger(taskId);
    const queued = await detail(runId);
    expect(queued.placement.required).toMatchObject({ wireVersion: 2 });
    // The v1 worker pulls and is told nothing matches it (a queued run was read and refused).
    await eventually(
      'the v1 worker pulled without a match',
      async () => ((await claimsIdle('no_matching_run')) > idleBefore ? true : undefined),
      { deadlineMs: 60_000 },
    );
    const waiting = await detail(runId);
    expect(waiting.status).toBe('queued');
    expect(waiting.attempts).toEqual([]);
    expect(waiting.pending).toMatchObject({ considered: 1, matching: 0, reasons: { wire_version: 1 } });
    expect(refusedAnswers(held)).toEqual([]);

    const current = h.startWorker('router-v2');
    await h.untilOnline(current);
    const ended = await h.untilRunEnds(runId);
    expect(ended.status).toBe('succeeded');
    expect((await detail(runId)).attempts.map((a) => a.workerId)).toEqual(['router-v2']);
    expect(await h.output(runId, 'stdout')).toBe('签到 ***\n');

    // /metrics: one live worker of each protocol version, labelled with its software and wire version.
    const metrics = (await h.t.admin('GET', '/metrics')).raw;
    expect(metrics).toContain('ql_worker_versions{software="0.1.0",protocol="3",wire="1"} 1\n');
    expect(metrics).toContain('ql_worker_versions{software="0.1.0",protocol="4",wire="2"} 1\n');

    current.kill('SIGTERM');
    expect((await current.exited).code).toBe(WORKER_EXIT.ok);
  });

  it('with the variable disabled, the v1 worker runs tasks again; a required workerVersion is never offered and holds a run from older workers', async () => {
    expect((await h.t.admin('PATCH', '/api/v1/env-vars/JD_COOKIE', { enabled: false })).status).toBe(200);
    const plain = await h.trigger(await h.createTask({ runtime: 'shell', command: 'echo 青龙' }));
    expect((await h.untilRunEnds(plain)).status).toBe('succeeded');
    expect((await detail(plain)).placement.required).not.toHaveProperty('wireVersion');
    expect((await detail(plain)).attempts.map((a) => a.workerId)).toEqual(['router-v1']);

    // Satisfied by the v1 worker's 0.1.0: offered without the field, which no wire version has.
    const satisfied = await h.trigger(
      await h.createTask({
        runtime: 'shell',
        command: 'echo 版本',
        placement: { required: { workerVersion: '>=0.1.0' } },
      }),
    );
    expect((await h.untilRunEnds(satisfied)).status).toBe('succeeded');
    // A v1 chunk has no stream (ADR 0032 came later): stored as `unknown`, as v1 workers' output is.
    expect((await h.logs(satisfied)).items.map((i) => [i.stream, i.text])).toEqual([['unknown', '版本\n']]);

    const later = await h.trigger(
      await h.createTask({
        runtime: 'shell',
        command: 'echo 新版',
        placement: { required: { workerVersion: '>=0.2.0' } },
      }),
    );
    const idleBefore = await claimsIdle('no_matching_run');
    await eventually(
      'the worker pulled without a match',
      async () => ((await claimsIdle('no_matching_run')) > idleBefore ? true : undefined),
      { deadlineMs: 60_000 },
    );
    expect(await detail(later)).toMatchObject({
      status: 'queued',
      attempts: [],
      // The current worker stopped: it is counted as expired, the v1 one as too old.
      pending: { considered: 2, matching: 0, reasons: { worker_version: 1, expired: 1 } },
    });
    expect((await h.t.admin('POST', `/api/v1/runs/${later}/cancel`, {})).status).toBeLessThan(300);
    expect(refusedAnswers(held)).toEqual([]);
  });
});
