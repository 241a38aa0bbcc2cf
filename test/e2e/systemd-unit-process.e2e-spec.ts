/**
 * Issue 18: the systemd unit's worker joins by enrollment, run as a real process. No systemd here:
 * what it would do is replayed from deploy/systemd/qinglong-worker@.service as written:
 * - `%i` is the instance (a worker id), `%d` a 0700 credentials folder into which each
 *   `LoadCredential=` source is copied, as systemd copies it;
 * - absolute paths under /etc/qinglong and /var/lib stand in temp folders of the same layout (the
 *   StateDirectory made with StateDirectoryMode); the EnvironmentFile holds this test's control-plane URL;
 * - ExecStart, the launcher of the install folder, is this checkout's bin/ql-worker, starting the
 *   worker's sources (QL_WORKER_ENTRY, NODE_OPTIONS) instead of the bundle;
 * - QL_WORKER_RUN_AS names a user this machine may lack: its numeric ids (10001) stand in;
 *   QL_WORKER_REQUEST_TIMEOUT_MS is raised for the one enrollment call on a loaded machine.
 * The control plane is a real one with the dev PKI's worker issuer; the token is made by the CLI's
 * `enroll-token create --out`, as docs/operations.md tells.
 */
import { X509Certificate } from 'node:crypto';
import { chmodSync, copyFileSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { LoggedProcess } from '../support/child-process';
import { ENROLL_REQUEST_TIMEOUT_MS, issuerEnv } from '../support/enrolled-worker';
import { ROOT, WORKER, runCli } from '../support/entry-points';
import { RemoteRunHarness, eventually } from '../support/remote-run-harness';
import { parseUnit, replayUnitStart, unitCredentials, unitEnvironment } from '../support/systemd-unit';
import { LAUNCHER } from '../support/worker-launcher';
import { WORKER_EXIT } from '@ql/contracts';

jest.setTimeout(180_000);

const unit = parseUnit(readFileSync(join(ROOT, 'deploy', 'systemd', 'qinglong-worker@.service'), 'utf8'));
const service = unit.Service!;
const INSTANCE = 'router-7';

describe('the systemd unit’s ExecStart as a real process: the worker enrolls with its credential and registers', () => {
  let h: RemoteRunHarness;
  let root: string;
  /** A path of the unit, in this test's stand-in for the machine's file system. */
  const local = (path: string) => (/^\/(etc|var\/lib)\//.test(path) ? join(root, path) : path);

  beforeAll(async () => {
    h = await RemoteRunHarness.start('sqlite', [], (pki) => issuerEnv(pki));
    root = h.folder('machine');
    mkdirSync(root, { recursive: true });
    // As / is: the task user passes through to its run folders under the StateDirectory.
    chmodSync(h.folder(''), 0o711);
    chmodSync(root, 0o711);
  });
  afterAll(async () => {
    await h?.close();
  });

  it('enrolls at its first start (own 0600 key in the StateDirectory, the token never in its environment), registers, and stops on SIGTERM with exit 0', async () => {
    // What the operator installs: the CA, the token file (the CLI writes it), worker.env.
    const credentialsSource = unitCredentials(service, INSTANCE);
    const env0 = unitEnvironment(service, { i: INSTANCE, d: '%d' });
    mkdirSync(dirname(local(env0.QL_WORKER_TLS_CA!)), { recursive: true });
    copyFileSync(h.pki.caCertPath, local(env0.QL_WORKER_TLS_CA!));
    const tokenSource = local(credentialsSource['enroll-token']!);
    mkdirSync(dirname(tokenSource), { recursive: true, mode: 0o700 });
    const made = await runCli(
      { QL_DATABASE_URL: h.databaseUrl },
      'enroll-token',
      'create',
      '--worker',
      INSTANCE,
      '--out',
      tokenSource,
    );
    expect(made.code).toBe(0);
    const token = readFileSync(tokenSource, 'utf8').trim();
    const [environmentFile] = service.EnvironmentFile!;
    mkdirSync(dirname(local(environmentFile!)), { recursive: true });
    writeFileSync(local(environmentFile!), `QL_WORKER_CONTROL_PLANE_URL=${h.t.plane.ingressUrl}\n`);

    // What systemd does at start: the StateDirectory, the credentials copied, the environment.
    const { env: unitEnv, state } = replayUnitStart(service, INSTANCE, {
      credentials: h.folder('credentials'),
      onMachine: local,
    });
    const fromFile = Object.fromEntries(
      readFileSync(local(environmentFile!), 'utf8')
        .trim()
        .split('\n')
        .map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)]),
    );
    const env = { ...unitEnv, ...fromFile };
    expect(env.QL_WORKER_RUN_AS).toBe('qinglong-task');
    env.QL_WORKER_RUN_AS = '10001:10001';
    // A shared, loaded test machine: the one enrollment call gets the deadline the other process tests give it.
    env.QL_WORKER_REQUEST_TIMEOUT_MS = String(ENROLL_REQUEST_TIMEOUT_MS);
    const workingDirectory = service.WorkingDirectory![0]!;
    expect(service.ExecStart).toEqual([`${workingDirectory}/${LAUNCHER}`]);
    const worker = new LoggedProcess(join(ROOT, LAUNCHER), [], {
      cwd: ROOT,
      env: {
        ...env,
        QL_WORKER_NODE: process.execPath,
        QL_WORKER_ENTRY: join(ROOT, WORKER),
        NODE_OPTIONS: `--require ${join(ROOT, 'apps/worker/test-support/swc-register.js')}`,
      },
    });
    try {
      const online = await eventually(
        `${INSTANCE} online`,
        async () => {
          if (!worker.running) throw new Error(`the worker exited\n${worker.transcript()}`);
          const view = await h.worker(INSTANCE);
          // Its own line too: it reaches this test through a pipe, after the control plane's view.
          const registered = worker.lines.find((l) => l.msg === 'worker registered');
          return view?.status === 'online' && view.sessionId === registered?.sessionId ? view : undefined;
        },
        { deadlineMs: 90_000 },
      );
      expect(online.workerId).toBe(INSTANCE);
      expect(worker.messages()).toEqual(
        expect.arrayContaining([
          'worker machine class',
          'worker enrolling with its token',
          'worker certificate enrolled',
          'worker registered',
        ]),
      );
      // Its key and certificate in the StateDirectory, the key 0600; the certificate the issuer's.
      expect(env.QL_WORKER_TLS_KEY!.startsWith(`${state}/`)).toBe(true);
      expect(statSync(env.QL_WORKER_TLS_KEY!).mode & 0o777).toBe(0o600);
      const cert = new X509Certificate(readFileSync(env.QL_WORKER_TLS_CERT!));
      expect(cert.checkIssued(new X509Certificate(readFileSync(h.pki.workerIssuerCertPath)))).toBe(true);
      const environ = readFileSync(`/proc/${worker.pid}/environ`, 'utf8');
      expect(environ).not.toContain(token);
      expect(worker.transcript()).not.toContain(token);
      worker.kill('SIGTERM');
      expect(await worker.exited).toEqual({ code: WORKER_EXIT.ok, signal: null });
    } finally {
      if (worker.running) {
        worker.kill('SIGKILL');
        await worker.exited;
      }
    }
  });
});
