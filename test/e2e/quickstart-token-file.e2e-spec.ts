/**
 * Issue 18 (ADR 0045): `npm start` beside an operator's token file. With `QL_WORKER_ENROLL_TOKEN_FILE`
 * set, the quickstart makes no token of its own (a second token would be two settings, exit 2): its
 * worker enrolls with the file's token and registers.
 */
import { existsSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { EntryPoint, QUICKSTART, quickstartEnv, runCli, tempDir } from '../support/entry-points';

// Two CLI processes and a quickstart start take seconds each on a loaded machine.
jest.setTimeout(240_000);

describe('the quickstart (npm start) with an enrollment token file', () => {
  let dir: string;
  let quickstart: EntryPoint | undefined;

  afterAll(async () => {
    if (quickstart?.running) {
      quickstart.kill('SIGTERM');
      await quickstart.exited;
    }
    rmSync(dir, { recursive: true, force: true });
  });

  it("its worker enrolls with the file's token; the quickstart makes none", async () => {
    dir = tempDir('ql-quickstart-token-file-');
    const tokenFile = join(dir, 'worker-1.token');
    const env = await quickstartEnv(dir);
    expect((await runCli(env, 'migrate')).code).toBe(0);
    expect(
      (await runCli(env, 'enroll-token', 'create', '--worker', 'worker-1', '--out', tokenFile)).code,
    ).toBe(0);
    expect(existsSync(tokenFile)).toBe(true);

    const q = (quickstart = new EntryPoint(QUICKSTART, { ...env, QL_WORKER_ENROLL_TOKEN_FILE: tokenFile }));
    const registered = await q.until(
      'worker-1 registered',
      async () =>
        q.lines.find((l) => l.msg === 'worker registered' || String(l.msg).includes('exited with code')),
      { deadlineMs: 120_000 },
    );
    expect(registered.msg).toBe('worker registered');
    expect(q.messages().filter((m) => m.includes('enrolls with a new token'))).toEqual([]);
    expect(existsSync(join(dir, 'worker', 'worker-1', 'tls', 'worker.key'))).toBe(true);
  });
});
