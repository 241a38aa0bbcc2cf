/**
 * Issue 18, deployments: the worker reads its enrollment token from `QL_WORKER_ENROLL_TOKEN_FILE` (a
 * Kubernetes Secret, a systemd credential, a Compose volume), with real worker processes, a real
 * control plane and real TLS. It joins with the file and the CA only, the token never in its
 * environment; a restart with the (now used) token file still there neither enrolls nor needs it;
 * the file beside QL_WORKER_ENROLL_TOKEN, or a file that cannot be read, stops it at start (exit 2)
 * before it makes a key or calls the control plane.
 */
import { X509Certificate } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { WorkerMachine, issuerEnv, startOnMachine, workerMachine } from '../support/enrolled-worker';
import { RemoteRunHarness, RunWorker } from '../support/remote-run-harness';
import { WORKER_EXIT } from '@ql/contracts';

jest.setTimeout(180_000);

describe('QL_WORKER_ENROLL_TOKEN_FILE, processes (sqlite)', () => {
  let h: RemoteRunHarness;

  beforeAll(async () => {
    h = await RemoteRunHarness.start('sqlite', ['hand-made'], (pki) => issuerEnv(pki));
  });
  afterAll(async () => {
    await h?.close();
  });

  /** A token for `workerId`, written as a deployment would: one line, 0600. */
  const tokenFile = async (workerId: string, dir: string) => {
    const res = await h.t.admin('POST', '/api/v1/enrollment-tokens', { workerId });
    if (res.status !== 201) throw new Error(`token: ${res.status} ${res.raw}`);
    const token = (res.body as { token: string }).token;
    mkdirSync(dir, { recursive: true });
    const file = join(dir, 'token');
    writeFileSync(file, `${token}\n`, { mode: 0o600 });
    return { token, file };
  };
  const machine = (name: string) => workerMachine(h, name);
  const start = (workerId: string, m: WorkerMachine, env: Record<string, string>) =>
    startOnMachine(h, workerId, m, env);
  const fingerprintOf = (path: string) =>
    new X509Certificate(readFileSync(path)).fingerprint256.replaceAll(':', '').toLowerCase();
  const said = (w: RunWorker, msg: string) => w.lines.some((l) => l.msg === msg);

  it('joins with the token file and the CA only, the token never in its environment; restarted with the used file still there, it renews and registers without enrolling', async () => {
    const m = machine('file-join');
    const { token, file } = await tokenFile('file-join', join(m.dir, 'secret'));
    const first = start('file-join', m, { QL_WORKER_ENROLL_TOKEN_FILE: file });
    await h.untilOnline(first);
    expect(said(first, 'worker enrolling with its token')).toBe(true);
    expect(statSync(m.key).mode & 0o777).toBe(0o600);
    const enrolled = fingerprintOf(m.cert);
    const stored = await h.t.plane.core.repositories.workerCertificates.find(enrolled);
    expect(stored).toMatchObject({ workerId: 'file-join' });
    // The file form keeps the token out of /proc/<pid>/environ (and out of every line it wrote).
    const environ = readFileSync(`/proc/${first.pid}/environ`, 'utf8');
    expect(environ).toContain(`QL_WORKER_ENROLL_TOKEN_FILE=${file}`);
    expect(environ).not.toContain(token);
    expect(first.transcript()).not.toContain(token);
    first.kill('SIGTERM');
    expect((await first.exited).code).toBe(WORKER_EXIT.ok);

    // The token is used: enrolling with it again would be refused (exit 8). The restart keeps its files.
    const again = start('file-join', m, { QL_WORKER_ENROLL_TOKEN_FILE: file });
    await h.untilOnline(again);
    expect(said(again, 'worker enrolling with its token')).toBe(false);
    expect(
      again.lines.find((l) => String(l.msg).includes('is set but the worker holds a usable certificate')),
    ).toMatchObject({
      msg: 'QL_WORKER_ENROLL_TOKEN_FILE is set but the worker holds a usable certificate: not enrolling',
    });
    expect(said(again, 'worker certificate renewed')).toBe(true); // every start renews (ADR 0045 §4)
    expect(fingerprintOf(m.cert)).not.toBe(enrolled);
    again.kill('SIGTERM');
    expect((await again.exited).code).toBe(WORKER_EXIT.ok);
  });

  it('refuses the file beside QL_WORKER_ENROLL_TOKEN, and a file it cannot read: exit 2 at start, no key made, nothing sent', async () => {
    const m = machine('file-refused');
    const { token, file } = await tokenFile('file-refused', join(m.dir, 'secret'));
    const both = start('file-refused', m, {
      QL_WORKER_ENROLL_TOKEN_FILE: file,
      QL_WORKER_ENROLL_TOKEN: token,
    });
    expect(await both.exited).toEqual({ code: WORKER_EXIT.config, signal: null });
    expect(both.stderr).toEqual([
      'worker configuration error: set QL_WORKER_ENROLL_TOKEN or QL_WORKER_ENROLL_TOKEN_FILE, not both',
    ]);
    const missing = join(m.dir, 'secret', 'no-such-token');
    const unreadable = start('file-refused', m, { QL_WORKER_ENROLL_TOKEN_FILE: missing });
    expect(await unreadable.exited).toEqual({ code: WORKER_EXIT.config, signal: null });
    expect(unreadable.stderr).toEqual([
      `worker configuration error: QL_WORKER_ENROLL_TOKEN_FILE=${missing} cannot be read (ENOENT): give the file the token was written to`,
    ]);
    for (const w of [both, unreadable]) expect(w.transcript()).not.toContain(token);
    expect(existsSync(m.key) || existsSync(`${m.key}.pending`)).toBe(false);
    // The token is still unused: the worker enrolls with it once the setting is right.
    const fixed = start('file-refused', m, { QL_WORKER_ENROLL_TOKEN_FILE: file });
    await h.untilOnline(fixed);
    fixed.kill('SIGTERM');
    expect((await fixed.exited).code).toBe(WORKER_EXIT.ok);
  });
});
