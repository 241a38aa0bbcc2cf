/**
 * Issue 9 item 7: a worker whose control plane disappears for longer than the session lease is fenced
 * when it comes back (exit 3, by design) — and the quickstart (`npm start`) supervising it restarts
 * it, so the new process registers a new session and runs the next task. The control plane
 * "disappears" for the worker only: its ingress is reached through a TCP proxy the test takes down
 * (connections refused and dropped), while the admin API stays up for the test to watch.
 */
import { spawnSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import request from 'supertest';
import { WORKER_EXIT } from '@ql/contracts';
import { CLI, EntryPoint, QUICKSTART, ROOT, freePort, tempDir } from '../support/entry-points';
import { PostgresProxy } from '../support/postgres-proxy';
import {
  RunView,
  TERMINAL_RUN_STATUSES,
  WorkerView,
  eventually,
  optionalWorkerEnv,
} from '../support/remote-run-harness';

// Real worker processes: a start takes seconds on a loaded machine, a run several of them.
jest.setTimeout(180_000);

const SESSION_LEASE_MS = 5_000;

describe('the quickstart supervisor after a control-plane outage longer than the session lease', () => {
  let dir: string;
  let q: EntryPoint;
  let proxy: Awaited<ReturnType<typeof PostgresProxy.start>>;
  let admin: (
    method: 'get' | 'post',
    path: string,
    body?: object,
  ) => Promise<{ status: number; body: unknown }>;
  let before: WorkerView;

  const registrations = () => q.lines.filter((l) => l.msg === 'worker registered');
  const worker = async () => (await admin('get', '/api/v1/workers/worker-1')).body as WorkerView;

  beforeAll(async () => {
    dir = tempDir('ql-supervisor-');
    const ports = { admin: await freePort(), ingress: await freePort() };
    // The same proxy class the database-outage tests use: it forwards bytes, whatever the protocol (TLS here).
    proxy = await PostgresProxy.start(`https://127.0.0.1:${ports.ingress}`);
    const env = {
      QL_ADMIN_PORT: String(ports.admin),
      QL_INGRESS_PORT: String(ports.ingress),
      QL_DATABASE_URL: `sqlite:${join(dir, 'ql.sqlite')}`,
      QL_DEV_PKI_DIR: join(dir, 'pki'),
      QL_LOG_LEVEL: 'warn',
      QL_SESSION_LEASE_MS: String(SESSION_LEASE_MS),
      QL_RUN_LEASE_MS: '5000',
      QL_SWEEP_INTERVAL_MS: '200',
      QL_WORKER_CONTROL_PLANE_URL: new URL(proxy.url).origin,
      QL_WORKER_HEARTBEAT_MS: '200',
      QL_WORKER_REQUEST_TIMEOUT_MS: '2000',
      QL_WORKER_JOURNAL_DIR: join(dir, 'journal'),
      QL_WORKER_WORK_DIR: join(dir, 'runs'),
      ...optionalWorkerEnv(),
    };
    q = new EntryPoint(QUICKSTART, env);
    await q.until('worker-1 registered', async () => registrations()[0], { deadlineMs: 60_000 });

    // An admin key, made the way the README says (the CLI against the same database).
    const cli = spawnSync(
      process.execPath,
      [
        '-r',
        './apps/worker/test-support/swc-register.js',
        CLI,
        'api-key',
        '--name',
        'e2e',
        '--role',
        'admin',
      ],
      {
        cwd: ROOT,
        env: { PATH: process.env.PATH ?? '', QL_DATABASE_URL: env.QL_DATABASE_URL },
        encoding: 'utf8',
      },
    );
    expect(cli.status).toBe(0);
    const { token } = JSON.parse(cli.stdout) as { token: string };
    const server = request(`http://127.0.0.1:${ports.admin}`);
    admin = async (method, path, body) => {
      const res = await server[method](path).set('authorization', `Bearer ${token}`).send(body);
      return { status: res.status, body: res.body as unknown };
    };
    // Online as seen through the admin API. On a loaded machine the first session may lapse before this
    // read (5 s leases) — the supervisor then restarts the fenced worker, as this file tests later on.
    before = await eventually('worker-1 online', async () => {
      const w = await worker();
      return w.status === 'online' ? w : undefined;
    });
  });
  afterAll(async () => {
    if (q?.running) {
      q.kill('SIGTERM');
      await q.exited;
    }
    await proxy?.down();
    rmSync(dir, { recursive: true, force: true });
  });

  it('the worker, fenced once the control plane is back, is restarted and registers a new session', async () => {
    const mark = q.lines.length; // what the quickstart said before the outage is not this test's
    const registered = registrations().length;
    await proxy.down();
    // Down for longer than the session lease: wait until the control plane holds it expired.
    await eventually(
      "worker-1's session lease over",
      async () => {
        const view = await worker();
        return Date.parse(view.leaseExpiresAt) + 500 < Date.now() ? view : undefined;
      },
      { deadlineMs: SESSION_LEASE_MS * 3, pollMs: 200 },
    );
    await proxy.up();

    const restart = await q.until(
      'the restart line',
      async () =>
        q.lines
          .slice(mark)
          .find((l) => typeof l.msg === 'string' && l.msg.startsWith('quickstart: worker-1 exited')),
      { deadlineMs: 60_000 },
    );
    expect(restart).toMatchObject({ level: 'warn', code: WORKER_EXIT.fenced });
    // The new process registered it (its log line may come a moment after the row is committed).
    const after = await q.until(
      'a new worker-1 session online, registered by the restarted process',
      async () => {
        const view = await worker();
        const logged = registrations().some((l) => l.sessionId === view.sessionId);
        return view.generation > before.generation && view.status === 'online' && logged ? view : undefined;
      },
      { deadlineMs: 60_000, pollMs: 200 },
    );
    expect(after.sessionId).not.toBe(before.sessionId);
    // Every registration since the outage is a new session; usually one, but on a loaded machine a new
    // 5 s session may lapse too and be restarted again (the property is "new", not "exactly one").
    const later = registrations()
      .slice(registered)
      .map((l) => l.sessionId);
    expect(later).toContain(after.sessionId);
    expect(later).not.toContain(before.sessionId);
    expect(new Set(later).size).toBe(later.length);
  });

  it('the restarted worker runs the next task', async () => {
    const task = await admin('post', '/api/v1/tasks', {
      name: 'after the outage',
      runtime: 'shell',
      command: 'echo "back again"',
    });
    expect(task.status).toBe(201);
    const trigger = await admin('post', `/api/v1/tasks/${(task.body as { id: string }).id}/runs`, {});
    expect(trigger.status).toBe(201);
    const runId = (trigger.body as { run: { id: string } }).run.id;
    const run = await eventually(
      'the run ended',
      async () => {
        const view = (await admin('get', `/api/v1/runs/${runId}`)).body as RunView;
        return TERMINAL_RUN_STATUSES.includes(view.status) ? view : undefined;
      },
      { context: () => q.transcript() },
    );
    expect({ status: run.status, workers: run.attempts.map((a) => a.workerId) }).toEqual({
      status: 'succeeded',
      workers: ['worker-1'],
    });
    const logs = (await admin('get', `/api/v1/runs/${runId}/logs`)).body as { items: { text: string }[] };
    expect(logs.items.map((i) => i.text).join('')).toContain('back again\n');
  });
});
