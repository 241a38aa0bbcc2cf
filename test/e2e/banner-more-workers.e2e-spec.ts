/**
 * Issue 29.7: the standalone control plane's banner says how to add a worker, and what it says works:
 * an enrollment token (not a hand-made certificate that never renews) and this plane's own ingress
 * address and CA (not a fixed port 8443). The test follows the banner's lines: it makes the token
 * with the CLI and starts a worker with the settings the banner prints; the worker's state folders
 * go to a temp folder (the banner's command would put them under ./var of the folder it starts in).
 */
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { CONTROL_PLANE, EntryPoint, WORKER, quickstartEnv, runCli, tempDir } from '../support/entry-points';

jest.setTimeout(240_000);

describe("the control plane's banner: more workers", () => {
  let dir: string;
  const started: EntryPoint[] = [];

  afterAll(async () => {
    for (const p of started.reverse()) {
      if (p.running) {
        p.kill('SIGTERM');
        await p.exited;
      }
    }
    rmSync(dir, { recursive: true, force: true });
  });

  it('names an enrollment token, this ingress and this CA; a worker started as it says registers', async () => {
    dir = tempDir('ql-banner-');
    const env = await quickstartEnv(dir, { QL_LOG_LEVEL: 'info' });
    const plane = new EntryPoint(CONTROL_PLANE, env);
    started.push(plane);
    const ready = await plane.until('control plane ready', async () =>
      plane.lines.find((l) => l.msg === 'control plane ready'),
    );
    const banner = await plane.until('the banner', async () => {
      const text = plane.messages().map((m) => m.replace(/^\(not JSON\) /, ''));
      const at = text.findIndex((line) => line.includes('More workers'));
      return at >= 0 && text.length > at + 2 ? text.slice(at, at + 3) : undefined;
    });
    expect(banner[0]).toContain('npm run -s enroll-token -- create --worker <id>');
    expect(banner.join('\n')).not.toContain('npm run pki');
    const settings = Object.fromEntries(
      [...banner[1]!.matchAll(/\b(QL_[A-Z_]+)=(\S+)/g)].map(([, key, value]) => [key!, value!]),
    );
    expect(settings).toEqual({
      QL_PROFILE: 'worker',
      QL_WORKER_ID: '<id>',
      QL_WORKER_ENROLL_TOKEN: '<token>',
      QL_WORKER_CONTROL_PLANE_URL: String(ready.ingress),
      QL_WORKER_TLS_CA: join(dir, 'pki', 'ca.crt'),
    });
    expect(String(ready.ingress)).not.toContain(':8443');

    const made = await runCli(env, 'enroll-token', 'create', '--worker', 'router-7');
    expect(made.code).toBe(0);
    const { token } = JSON.parse(made.stdout) as { token: string };
    const state = join(dir, 'router-7');
    const worker = new EntryPoint(WORKER, {
      ...settings,
      QL_WORKER_ID: 'router-7',
      QL_WORKER_ENROLL_TOKEN: token,
      QL_WORKER_TLS_CERT: join(state, 'tls', 'worker.crt'),
      QL_WORKER_TLS_KEY: join(state, 'tls', 'worker.key'),
      QL_WORKER_JOURNAL_DIR: join(state, 'journal'),
      QL_WORKER_WORK_DIR: join(state, 'runs'),
      QL_WORKER_BUNDLE_CACHE_DIR: join(state, 'bundles'),
      QL_WORKER_REQUEST_TIMEOUT_MS: '8000',
    });
    started.push(worker);
    const registered = await worker.until(
      'router-7 registered',
      async () => worker.lines.find((l) => l.msg === 'worker registered' || !worker.running),
      { deadlineMs: 120_000 },
    );
    expect(registered).toMatchObject({ msg: 'worker registered' });
  });
});
