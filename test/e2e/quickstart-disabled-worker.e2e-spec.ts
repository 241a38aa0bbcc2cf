/**
 * Issue 16 item 4 (ADR 0035): `npm start` with an operator disabling its worker — the worker exits
 * with code 5 and the quickstart says how to bring it back instead of restarting it in a loop. Issue 30
 * item 2 (ADR 0060): the same for a worker that speaks no protocol version its control plane serves
 * (held to 3 by QL_WORKER_PROTOCOL_MAX, the control plane serving 4 by QL_PROTOCOL_MIN): exit 15.
 */
import { rmSync } from 'node:fs';
import { WORKER_EXIT } from '@ql/contracts';
import { CLI, EntryPoint, QUICKSTART, quickstartEnv, tempDir } from '../support/entry-points';

// A quickstart start (control plane, then worker) takes seconds on a loaded machine.
jest.setTimeout(180_000);

describe('the quickstart (npm start) when its worker exits for good', () => {
  const started: { dir: string; quickstart: EntryPoint }[] = [];
  const start = async (name: string, extra: Record<string, string>) => {
    const dir = tempDir(`ql-quickstart-${name}-`);
    const env = await quickstartEnv(dir, extra);
    const quickstart = new EntryPoint(QUICKSTART, env);
    started.push({ dir, quickstart });
    return { env, q: quickstart };
  };
  const exitLine = (q: EntryPoint) =>
    q.until(
      'the quickstart line about worker-1',
      async () => q.lines.find((l) => String(l.msg).startsWith('quickstart: worker-1 exited')),
      { deadlineMs: 60_000 },
    );

  afterAll(async () => {
    for (const { dir, quickstart } of started) {
      if (quickstart.running) {
        quickstart.kill('SIGTERM');
        await quickstart.exited;
      }
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('the disabled worker exits 5 and is not restarted; the line names enable', async () => {
    const { env, q } = await start('disabled', { QL_WORKER_HEARTBEAT_MS: '200' });
    const admin = Number(env.QL_ADMIN_PORT);
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
    const line = await exitLine(q);
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

  it('a worker that speaks no protocol version served exits 15 once and is not restarted; the line says what to check', async () => {
    const { q } = await start('protocol', { QL_PROTOCOL_MIN: '4', QL_WORKER_PROTOCOL_MAX: '3' });
    expect(await exitLine(q)).toMatchObject({
      level: 'error',
      code: WORKER_EXIT.protocolUnsupported,
      msg: expect.stringMatching(
        /^quickstart: worker-1 exited with code 15 \(the control plane serves no protocol version it speaks: check QL_WORKER_PROTOCOL_MAX, or upgrade\); not restarting it$/,
      ),
    });
    expect(q.messages()).toEqual(
      expect.arrayContaining([
        expect.stringMatching(
          /^worker exiting: the control plane serves none of the protocol versions this worker speaks \(3\.\.3\)/,
        ),
      ]),
    );
    expect(q.messages().filter((m) => m.startsWith('quickstart: worker-1 started'))).toHaveLength(1);
    expect(q.running).toBe(true); // the control plane goes on serving
  });
});
