/**
 * Issue 29 item 6 (ADR 0054): one SQLite file has one control plane. A second `npm start` in the same
 * folder on other ports stops at once with exit 2 naming the running one, starts no worker and leaves
 * the running one alone; the CLI commands that write the same file keep working beside it; a plane
 * killed with -9 leaves no stale lock behind.
 */
import { rmSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import {
  CONTROL_PLANE,
  EntryPoint,
  QUICKSTART,
  freePort,
  quickstartEnv,
  runCli,
  tempDir,
} from '../support/entry-points';

// Quickstart and control-plane starts take seconds each on a loaded machine.
jest.setTimeout(180_000);

describe('one control plane per SQLite file', () => {
  let dir: string;
  let env: Record<string, string>;
  const started: EntryPoint[] = [];
  const start = (file: string, with_: Record<string, string>) => {
    const p = new EntryPoint(file, with_);
    started.push(p);
    return p;
  };
  const ready = (p: EntryPoint, msg: string) =>
    p.until(msg, async () => p.lines.find((l) => l.msg === msg), { deadlineMs: 90_000 });

  beforeAll(async () => {
    dir = tempDir('ql-one-plane-');
    env = await quickstartEnv(dir);
  });
  afterAll(async () => {
    for (const p of started.filter((s) => s.running)) {
      p.kill('SIGTERM');
      await p.exited;
    }
    rmSync(dir, { recursive: true, force: true });
  });

  it('a second npm start in the same folder on other ports exits 2 naming the running plane; the CLI still writes', async () => {
    const first = start(QUICKSTART, env);
    await ready(first, 'worker registered');
    const planePid = Number(first.lines.find((l) => l.msg === 'quickstart: control plane ready')?.pid);

    const other = { ...env, QL_ADMIN_PORT: String(await freePort()), QL_INGRESS_PORT: String(await freePort()) };
    const second = start(QUICKSTART, other);
    expect(await second.exited).toEqual({ code: 2, signal: null });
    const said = second.stderr.join('\n');
    expect(said).toContain(
      `the database ${join(dir, 'ql.sqlite')} is in use by another control plane (pid ${planePid} on ${hostname()}, ` +
        `admin http://127.0.0.1:${env.QL_ADMIN_PORT}, ingress https://127.0.0.1:${env.QL_INGRESS_PORT}`,
    );
    expect(said).toContain('quickstart: the control plane did not start (code 2); no worker was started');
    expect(second.messages().filter((m) => /worker/.test(m))).toEqual([]);
    expect(first.running).toBe(true);

    // Short writers are not a second plane: each command works while the plane runs.
    const key = await runCli(env, 'api-key', '--name', 'beside', '--role', 'admin');
    expect(key.code).toBe(0);
    expect((await runCli(env, 'enroll-token', 'create', '--worker', 'w-beside')).code).toBe(0);
    expect((await runCli(env, 'secret', 'list')).code).toBe(0);
    const token = /"token":\s*"([^"]+)"/.exec(key.stdout)?.[1];
    const workers = await fetch(`http://127.0.0.1:${env.QL_ADMIN_PORT}/api/v1/workers/worker-1`, {
      headers: { authorization: `Bearer ${token}` },
    });
    expect(((await workers.json()) as { status: string }).status).toBe('online');
    first.kill('SIGTERM');
    expect((await first.exited).code).toBe(0);
  });

  it('a control plane killed with -9 leaves no lock: the next one on the file starts', async () => {
    const planeEnv = { ...env, QL_ADMIN_PORT: '0', QL_INGRESS_PORT: '0' };
    const killed = start(CONTROL_PLANE, planeEnv);
    await ready(killed, 'control plane ready');
    const refused = start(CONTROL_PLANE, planeEnv);
    expect((await refused.exited).code).toBe(2);
    expect(refused.stderr.join('\n')).toContain(`in use by another control plane (pid ${killed.pid} on`);
    killed.kill('SIGKILL');
    await killed.exited;
    const next = start(CONTROL_PLANE, planeEnv);
    await ready(next, 'control plane ready');
    next.kill('SIGTERM');
    expect((await next.exited).code).toBe(0);
  });
});
