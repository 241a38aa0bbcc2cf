/**
 * R-OPS-8: `npm start` (apps/control-plane/src/quickstart.ts) as a user runs it — a real quickstart
 * process with its control plane and worker children — supervising its worker, leaving a running
 * instance alone, and stopping everything when the terminal closes.
 */
import { existsSync, readFileSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { ingressPath, WORKER_EXIT } from '@ql/contracts';
import { CONTROL_PLANE_ENV, CONTROL_PLANE_NODE_FLAGS } from '../../apps/control-plane/src/node-flags';
import { WORKER_NODE_FLAGS, workerNodeFlags } from '../../apps/worker/src/node-flags';
import { LogLine } from '../support/child-process';
import {
  EntryPoint,
  QUICKSTART,
  freePort,
  portIsFree,
  postIngress,
  processAlive,
  runCli,
  tempDir,
} from '../support/entry-points';
import { newSessionId, registerBody } from '../support/fixtures';

interface WorkerRow {
  session_id: string;
  generation: number;
  status: string;
}

describe('the quickstart (npm start) with its control plane and worker processes', () => {
  let dir: string;
  let env: Record<string, string>;
  let ports: { admin: number; ingress: number };
  let first: EntryPoint;

  const registrations = (q: EntryPoint) => q.lines.filter((l) => l.msg === 'worker registered');
  const quickstartLine = (q: EntryPoint, text: string) =>
    q.lines.filter((l) => typeof l.msg === 'string' && l.msg.startsWith(`quickstart: ${text}`));
  /** worker-1's current session, read from the database file as an operator would. */
  const workerRow = (): WorkerRow | undefined => {
    const db = new Database(join(dir, 'ql.sqlite'), { readonly: true, fileMustExist: true });
    try {
      return db
        .prepare(`SELECT session_id, generation, status FROM workers WHERE worker_id = 'worker-1'`)
        .get() as WorkerRow | undefined;
    } finally {
      db.close();
    }
  };

  beforeAll(async () => {
    dir = tempDir('ql-quickstart-');
    ports = { admin: await freePort(), ingress: await freePort() };
    env = {
      QL_ADMIN_PORT: String(ports.admin),
      QL_INGRESS_PORT: String(ports.ingress),
      QL_DATABASE_URL: `sqlite:${join(dir, 'ql.sqlite')}`,
      QL_DEV_PKI_DIR: join(dir, 'pki'),
      QL_LOG_LEVEL: 'warn',
      QL_WORKER_HEARTBEAT_MS: '200',
      // Not the small flags a worker started without the launcher would get (ADR 0046).
      QL_WORKER_MACHINE_CLASS: 'large',
      // The last test's run is cancelled 3 s into the stop, not 5 s (the default budget's).
      QL_WORKER_STOP_BUDGET_MS: '6000',
    };
    first = new EntryPoint(QUICKSTART, env);
    await first.until('worker-1 registered', async () => registrations(first)[0], { deadlineMs: 60_000 });
  });
  afterAll(async () => {
    if (first?.running) {
      first.kill('SIGTERM');
      await first.exited;
    }
    rmSync(dir, { recursive: true, force: true });
  });

  it('starts its worker through bin/ql-worker: node, in the launcher’s place, under the flags of the class QL_WORKER_MACHINE_CLASS names (ADR 0046)', () => {
    expect(first.lines.find((l) => l.msg === 'worker machine class')).toMatchObject({
      machineClass: 'large',
      source: 'QL_WORKER_MACHINE_CLASS',
    });
    expect(workerNodeFlags('large')).not.toEqual(WORKER_NODE_FLAGS);
    const pid = Number(quickstartLine(first, 'worker-1 started')[0]?.pid);
    const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
    expect(argv[0]).toBe(process.execPath);
    expect(argv.slice(1, -1)).toEqual([...workerNodeFlags('large')]);
    expect(argv.at(-1)).toMatch(/apps\/worker\/src\/main\.[jt]s$/);
  });

  it("keeps its worker's journal and run folders beside its dev PKI folder, so two quickstarts never share a journal", () => {
    const pid = Number(quickstartLine(first, 'worker-1 started')[0]?.pid);
    const environ = readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0');
    expect(environ).toEqual(
      expect.arrayContaining([
        `QL_WORKER_JOURNAL_DIR=${join(dir, 'worker', 'worker-1', 'journal')}`,
        `QL_WORKER_WORK_DIR=${join(dir, 'worker', 'worker-1', 'runs')}`,
      ]),
    );
    expect(existsSync(join(dir, 'worker', 'worker-1', 'journal', 'journal.log'))).toBe(true);
  });

  it('its worker joins through enrollment: a token made for it, its own 0600 key beside its journal (ADR 0045)', () => {
    const tls = join(dir, 'worker', 'worker-1', 'tls');
    expect(statSync(join(tls, 'worker.key')).mode & 0o777).toBe(0o600);
    expect(existsSync(join(tls, 'worker.crt'))).toBe(true);
    expect(quickstartLine(first, 'worker-1 enrolls with a new token')).toHaveLength(1);
    expect(first.lines.some((l) => l.msg === 'worker certificate enrolled')).toBe(true);
    expect(first.transcript()).not.toMatch(/qlet_/); // the token is in no line
  });

  it('runs its control plane under the V8 flags of ADR 0020 and the environment of ADR 0024', () => {
    const children = readFileSync(`/proc/${first.pid}/task/${first.pid}/children`, 'utf8')
      .trim()
      .split(/\s+/);
    const argvs = children.map((pid) =>
      readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean),
    );
    const at = argvs.findIndex((argv) =>
      /apps\/control-plane\/src\/main\.[jt]s$/.test(argv[argv.length - 1]!),
    );
    expect(argvs[at]?.slice(1, 1 + CONTROL_PLANE_NODE_FLAGS.length)).toEqual([...CONTROL_PLANE_NODE_FLAGS]);
    // …and with the launchers' environment (ADR 0024).
    const environ = readFileSync(`/proc/${children[at]}/environ`, 'utf8').split('\0');
    expect(environ).toEqual(
      expect.arrayContaining(Object.entries(CONTROL_PLANE_ENV).map(([name, value]) => `${name}=${value}`)),
    );
  });

  it('restarts a fenced worker after 1 s, says so with the exit code, and the new process registers a new session', async () => {
    const before = registrations(first)[0]!;
    const ready = first.lines.find((l) => l.msg === 'control plane ready') as LogLine & { ingress: string };
    const workerPki = join(dir, 'pki', 'workers', 'worker-1');
    const replaced = await postIngress(
      ready.ingress,
      { ca: join(dir, 'pki', 'ca.crt'), cert: `${workerPki}.crt`, key: `${workerPki}.key` },
      ingressPath('worker-1', newSessionId(), 'register'),
      registerBody(),
    );
    expect(replaced.body).toMatchObject({ outcome: 'replaced', generation: Number(before.generation) + 1 });

    // Deadlines as generous as the first start's: a worker process start is seconds on a loaded machine.
    const restart = await first.until(
      'the restart line',
      async () => quickstartLine(first, 'worker-1 exited')[0],
      {
        deadlineMs: 60_000,
      },
    );
    expect(restart).toMatchObject({
      level: 'warn',
      msg: 'quickstart: worker-1 exited with code 3; restarting it in 1 s',
      code: WORKER_EXIT.fenced,
      delayMs: 1000,
    });
    const row = await first.until(
      'a new worker-1 session online',
      async () => {
        const now = workerRow();
        return now && now.generation === Number(before.generation) + 2 && now.status === 'online'
          ? now
          : undefined;
      },
      { pollMs: 100, deadlineMs: 60_000 },
    );
    // The row commits before the new worker reads the answer and logs it: await its line too.
    const registered = await first.until(
      'the new worker\'s "worker registered" line',
      async () => registrations(first)[1],
      {
        deadlineMs: 10_000,
      },
    );
    expect(row.session_id).toBe(registered.sessionId);
    expect(quickstartLine(first, 'worker-1 started')).toHaveLength(2);
  });

  it('a second quickstart on the same ports exits non-zero naming the busy port, starts no worker, and leaves the running session alone', async () => {
    const before = workerRow()!;
    // Another folder: in the same one the database's lock answers first (control-plane-one-per-database).
    const elsewhere = tempDir('ql-quickstart-second-');
    const second = new EntryPoint(QUICKSTART, {
      ...env,
      QL_DATABASE_URL: `sqlite:${join(elsewhere, 'ql.sqlite')}`,
      QL_DEV_PKI_DIR: join(elsewhere, 'pki'),
    });
    const exit = await second.exited;
    rmSync(elsewhere, { recursive: true, force: true });

    expect(exit).toEqual({ code: 1, signal: null });
    const stderr = second.stderr.join('\n');
    expect(stderr).toContain(`port ${ports.admin} on 127.0.0.1 (QL_ADMIN_PORT) is in use`);
    expect(second.stderr.filter((l) => l.includes('is in use'))).toHaveLength(1);
    expect(second.stderr.filter((l) => l.includes('quickstart: the control plane did not start'))).toEqual([
      'quickstart: the control plane did not start (code 1); no worker was started',
    ]);
    expect(stderr).not.toMatch(/^\s+at /m); // no stack trace
    expect(second.messages().filter((m) => /worker/.test(m))).toEqual([]);
    expect(workerRow()).toMatchObject({ session_id: before.session_id, generation: before.generation });
    expect(first.running).toBe(true);
  });

  it('SIGHUP (the terminal closes) with a run going: the worker cancels and reports it, then stops with the control plane; their ports are free', async () => {
    const pids = [
      Number(quickstartLine(first, 'control plane ready')[0]?.pid),
      Number(quickstartLine(first, 'worker-1 started').pop()?.pid),
    ];
    expect(pids.every(processAlive)).toBe(true);
    // A run longer than the worker's stop budget (issue 29 item 4: it was lost, then failed, a minute later).
    const key = await runCli(env, 'api-key', '--name', 'ops', '--role', 'admin');
    const token = /"token":\s*"([^"]+)"/.exec(key.stdout)![1]!;
    const admin = async (path: string, body?: unknown) => {
      const res = await fetch(`http://127.0.0.1:${ports.admin}${path}`, {
        method: body === undefined ? 'GET' : 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      return (await res.json()) as Record<string, unknown>;
    };
    const task = await admin('/api/v1/tasks', {
      name: '夜间同步',
      runtime: 'shell',
      command: 'echo 开始; sleep 40',
    });
    const runId = ((await admin(`/api/v1/tasks/${String(task.id)}/runs`, {})).run as { id: string }).id;
    // Its process started (the worker's line); the plane may show it `starting` a little longer.
    await first.until('the run started', async () =>
      first.lines.find((l) => l.msg === 'attempt started' && l.runId === runId),
    );
    const t0 = Date.now();

    first.kill('SIGHUP');
    expect(await first.exited).toEqual({ code: 0, signal: null });
    expect(pids.map(processAlive)).toEqual([false, false]);
    expect(await Promise.all([portIsFree(ports.admin), portIsFree(ports.ingress)])).toEqual([true, true]);
    process.stdout.write(`quickstart SIGHUP to exit with a run going: ${Date.now() - t0} ms (budget 6000)\n`);
    expect(first.messages()).toContain('worker offline');
    expect(first.messages()).toContainEqual(
      expect.stringMatching(/^stopping: cancelled run .* \(夜间同步\)/),
    );
    // Read from the database file, as an operator would with the plane stopped: cancelled, with why.
    const db = new Database(join(dir, 'ql.sqlite'), { readonly: true, fileMustExist: true });
    try {
      const ended = db
        .prepare(
          `SELECT r.status AS run, a.status AS attempt, a.error_summary AS why
           FROM runs r JOIN attempts a ON a.run_id = r.id WHERE r.id = ?`,
        )
        .all(runId);
      expect(ended).toEqual([
        {
          run: 'cancelled',
          attempt: 'cancelled',
          why: 'killed because its worker was stopped before the run ended (worker_shutdown)',
        },
      ]);
    } finally {
      db.close();
    }
  });
});
