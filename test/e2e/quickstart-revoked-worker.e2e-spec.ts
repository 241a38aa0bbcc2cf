/**
 * Issue 29 item 3 (ADR 0055): `npm start` with an operator revoking its worker — the worker exits 11
 * within a bounded time and the quickstart does not restart it (it used to log 401 for ever); the next
 * `npm start` sees no usable certificate (the revoked one was put aside), makes a token and the
 * worker enrolls and registers again.
 */
import { rmSync } from 'node:fs';
import { WORKER_EXIT } from '@ql/contracts';
import { EntryPoint, QUICKSTART, adminPost, quickstartEnv, tempDir } from '../support/entry-points';

// A quickstart start (control plane, then worker) takes seconds on a loaded machine.
jest.setTimeout(240_000);

/** A bound on a hang: the worker hears of the revocation at its next heartbeat (200 ms here). */
const EXIT_DEADLINE_MS = 30_000;

describe('the quickstart (npm start) when its worker is revoked', () => {
  let dir: string;
  const started: EntryPoint[] = [];

  afterAll(async () => {
    for (const q of started.filter((s) => s.running)) {
      q.kill('SIGTERM');
      await q.exited;
    }
    rmSync(dir, { recursive: true, force: true });
  });

  const workerExited = (q: EntryPoint) =>
    q.lines.find((l) => String(l.msg).startsWith('quickstart: worker-1 exited'));
  const registered = (q: EntryPoint) =>
    q.until('worker-1 registered', async () => q.lines.find((l) => l.msg === 'worker registered'), {
      deadlineMs: 90_000,
    });

  it('the revoked worker exits 11 and is not restarted; the next npm start enrolls it anew', async () => {
    dir = tempDir('ql-quickstart-revoked-');
    const env = await quickstartEnv(dir, { QL_WORKER_HEARTBEAT_MS: '200', QL_REVOCATION_CACHE_MS: '0' });
    const q = new EntryPoint(QUICKSTART, env);
    started.push(q);
    await registered(q);
    const revokedAt = Date.now();
    expect((await adminPost(env, '/api/v1/workers/worker-1/revoke')).status).toBe(200);
    const line = await q.until('the quickstart line about worker-1', async () => workerExited(q), {
      deadlineMs: EXIT_DEADLINE_MS,
    });
    process.stdout.write(
      `quickstart saw the revoked worker exit ${Date.now() - revokedAt} ms after the revocation (bound ${EXIT_DEADLINE_MS} ms)\n`,
    );
    expect(line).toMatchObject({
      level: 'error',
      code: WORKER_EXIT.certificateRevoked,
      msg: expect.stringMatching(
        /^quickstart: worker-1 exited with code 11 \(its certificate was revoked and put aside: .*npm start again.*\); not restarting it$/,
      ),
    });
    expect(q.messages().filter((m) => /heartbeat failed|heartbeat still failing/.test(m))).toEqual([]);
    expect(q.messages().filter((m) => m.startsWith('quickstart: worker-1 started'))).toHaveLength(1);
    expect(q.running).toBe(true);
    q.kill('SIGTERM');
    expect((await q.exited).code).toBe(0);

    // The next npm start: no usable certificate (put aside), so a new token, enrollment, a session.
    const next = new EntryPoint(QUICKSTART, env);
    started.push(next);
    await registered(next);
    expect(next.messages()).toContain('quickstart: worker-1 enrolls with a new token');
    expect(next.messages()).toContain('worker certificate enrolled');
    next.kill('SIGTERM');
    expect((await next.exited).code).toBe(0);
  });
});
