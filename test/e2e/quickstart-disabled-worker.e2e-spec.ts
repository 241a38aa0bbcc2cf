/**
 * Issue 16 item 4 (ADR 0035): `npm start` with an operator disabling its worker — the worker exits
 * with code 5 and the quickstart says how to bring it back instead of restarting it in a loop.
 */
import { rmSync } from 'node:fs';
import { WORKER_EXIT } from '@ql/contracts';
import { CLI, EntryPoint, QUICKSTART, quickstartEnv, tempDir } from '../support/entry-points';

// A quickstart start (control plane, then worker) takes seconds on a loaded machine.
jest.setTimeout(180_000);

describe('the quickstart (npm start) when its worker is disabled', () => {
  let dir: string;
  let quickstart: EntryPoint | undefined;

  afterAll(async () => {
    if (quickstart?.running) {
      quickstart.kill('SIGTERM');
      await quickstart.exited;
    }
    rmSync(dir, { recursive: true, force: true });
  });

  it('the disabled worker exits 5 and is not restarted; the line names enable', async () => {
    dir = tempDir('ql-quickstart-disabled-');
    const env = await quickstartEnv(dir, { QL_WORKER_HEARTBEAT_MS: '200' });
    const admin = Number(env.QL_ADMIN_PORT);
    const q = (quickstart = new EntryPoint(QUICKSTART, env));
    await q.until('worker-1 registered', async () => q.lines.find((l) => l.msg === 'worker registered'), {
      deadlineMs: 60_000,
    });
    const cli = new EntryPoint(CLI, env, ['api-key', '--name', 'ops', '--role', 'admin']);
    expect((await cli.exited).code).toBe(0);
    const token = /"token":\s*"([^"]+)"/.exec(cli.messages().join('\n'))?.[1];
    expect(token).toBeDefined();

    const res = await fetch(`http://127.0.0.1:${admin}/api/v1/workers/worker-1/disable`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}` },
    });
    expect(res.status).toBe(200);
    const line = await q.until(
      'the quickstart line about worker-1',
      async () => q.lines.find((l) => String(l.msg).startsWith('quickstart: worker-1 exited')),
      { deadlineMs: 60_000 },
    );
    expect(line).toMatchObject({
      level: 'error',
      code: WORKER_EXIT.disabled,
      msg: expect.stringMatching(
        /^quickstart: worker-1 exited with code 5 \(disabled by an operator: POST \/api\/v1\/workers\/worker-1\/enable, .*\); not restarting it$/,
      ),
    });
    expect(q.messages().filter((m) => m.startsWith('quickstart: worker-1 started'))).toHaveLength(1);
    expect(q.running).toBe(true);
  });
});
