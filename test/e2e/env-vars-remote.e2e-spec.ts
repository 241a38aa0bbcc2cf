// Issue 31 item 2 end to end (ADR 0061): a real worker process over real TLS runs `京东签到`, a node
// script that prints the global secret variable JD_COOKIE (QingLong's multi-value form) and a global
// plain one; the run log shows the cookie as `***` and the plain value as it is, the run's detail names
// what it received, and no stored row or log line of the plane holds the cookie.
import { randomBytes } from 'node:crypto';
import { snapshotDatabase } from '../support/db-snapshot';
import { RemoteRunHarness, RunWorker } from '../support/remote-run-harness';
import type { Dialect } from '../support/test-plane';
import { CapturedLog } from '../support/captured-log';

jest.setTimeout(120_000);

const COOKIES = 'pt_key=1;pt_pin=a&pt_key=2;pt_pin=b';

describe.each<Dialect>(['sqlite', 'postgres'])('global env vars on a real worker process (%s)', (dialect) => {
  let h: RemoteRunHarness;
  let worker: RunWorker;
  const planeLog = new CapturedLog();

  beforeAll(async () => {
    h = await RemoteRunHarness.start(
      dialect,
      ['worker-a'],
      { QL_SECRETS_KEY: randomBytes(32).toString('base64') },
      { logger: planeLog },
    );
    worker = h.startWorker('worker-a');
    await h.untilOnline(worker);
  });
  afterAll(async () => {
    await h?.close();
  });

  it('京东签到 receives the secret JD_COOKIE and the plain JD_UA; its log shows the cookie as ***', async () => {
    for (const body of [
      { name: 'JD_COOKIE', value: COOKIES, secret: true, remark: '两个京东账号' },
      { name: 'JD_UA', value: 'jdapp;iPhone;京东' },
    ])
      expect((await h.t.admin('POST', '/api/v1/env-vars', body)).status).toBe(201);
    const command = [
      'console.log("cookie=" + process.env.JD_COOKIE);',
      'console.log("accounts=" + process.env.JD_COOKIE.split("&").length);',
      'console.log("first=" + process.env.JD_COOKIE.split("&")[0]);',
      'console.log("ua=" + process.env.JD_UA);',
    ].join('\n');
    const task = await h.t.admin('POST', '/api/v1/tasks', { name: '京东签到', runtime: 'node', command });
    expect(task.status).toBe(201);
    const runId = await h.trigger((task.body as { id: string }).id);
    const run = await h.untilRunEnds(runId);
    expect(run.status).toBe('succeeded');
    expect(await h.output(runId, 'stdout')).toBe('cookie=***\naccounts=2\nfirst=***\nua=jdapp;iPhone;京东\n');
    expect((await h.t.admin('GET', `/api/v1/runs/${runId}`)).body).toMatchObject({
      envVars: [
        { name: 'JD_COOKIE', version: 1, secret: true },
        { name: 'JD_UA', version: 1, secret: false },
      ],
    });
    const stored = JSON.stringify(await snapshotDatabase(h.t.plane.core.db));
    for (const text of [
      stored,
      planeLog.lines.join('\n'),
      worker.lines.map((l) => JSON.stringify(l)).join('\n'),
    ])
      for (const value of [COOKIES, ...COOKIES.split('&')]) expect(text).not.toContain(value);
  });
});
