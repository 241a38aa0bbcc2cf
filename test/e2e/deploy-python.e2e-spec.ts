/**
 * Issue 16 item 10: a Python task runs through the worker command lines the Kubernetes manifest and
 * the systemd unit ship (test/e2e/compose.e2e-spec.ts does the same for Compose). No kubelet, no
 * systemd and no Docker engine here, so what stands in for them:
 * - Kubernetes: the image is replayed (test/support/docker-emulation.ts: its COPY steps, the build,
 *   the production packages; PATH offers only the task runtimes the image installs); the worker
 *   container's `args` and `env` run as a process in the image's WORKDIR; the items of the CA ConfigMap
 *   and of the enrollment token Secret (a token made through the admin API) are files in folders standing
 *   for their mountPaths, the `state` volume a 0711 folder; the control plane's
 *   Service URL becomes a test control plane's ingress. Capabilities, seccomp and the read-only root
 *   are not applied.
 * - systemd: the install of docs/operations.md is replayed: bin/, dist/ (from the replayed build),
 *   deploy/, package.json and package-lock.json copied into a folder standing for WorkingDirectory, the
 *   production packages linked; ExecStart (the launcher, under that folder) runs there with the unit's
 *   Environment= lines (`%i` the instance, `%d` a credentials folder the LoadCredential= token is copied
 *   into), the EnvironmentFile's URL and systemd's default PATH; /etc/qinglong and the StateDirectory
 *   become temp folders.
 * Both workers join by enrollment (issue 18): the control plane has the dev PKI's worker issuer.
 *   The host's `sh` and `python3` are used, as the docs require of the host. `qinglong-task` is not a
 *   user on this machine: its numeric stand-in is the image's 10001:10001. Capabilities, KillMode and
 *   restarts are not applied (test/deploy/systemd-unit.spec.ts reads them).
 */
import {
  chmodSync,
  copyFileSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { WORKER_EXIT } from '@ql/contracts';
import { LoggedProcess } from '../support/child-process';
import { REPO_ROOT, ReplayedImage, parseDockerfile, replayImage } from '../support/docker-emulation';
import { ENROLL_REQUEST_TIMEOUT_MS, issuerEnv } from '../support/enrolled-worker';
import { RemoteRunHarness, WAIT_DEADLINE_MS } from '../support/remote-run-harness';
import { parseUnit, replayUnitStart, unitCredentials } from '../support/systemd-unit';

/* eslint-disable @typescript-eslint/no-explicit-any -- deployment files, read as plain YAML */
const read = (...path: string[]) => readFileSync(join(REPO_ROOT, ...path), 'utf8');
const PYTHON = 'import sys\nprint("py", sys.version_info[0])';

/** Replaces a path under `mount` (as the container or unit sees it) with the same path under `local`. */
const remap = (value: string, mount: string, local: string) =>
  value === mount || value.startsWith(`${mount}/`) ? local + value.slice(mount.length) : value;

describe('a Python task through the Kubernetes and systemd worker command lines', () => {
  let h: RemoteRunHarness;
  let image: ReplayedImage;
  const processes: LoggedProcess[] = [];
  // Stands for the host's / (0711, as /var/lib and /opt are passable): the task user enters its run folder.
  const root = mkdtempSync(join(tmpdir(), 'ql-deploy-python-'));
  chmodSync(root, 0o711);
  const folder = (name: string) => join(root, name);

  beforeAll(async () => {
    [h, image] = await Promise.all([
      RemoteRunHarness.start('sqlite', [], (pki) => issuerEnv(pki)),
      replayImage(parseDockerfile(read('Dockerfile'))),
    ]);
  }, 180_000);

  afterAll(async () => {
    for (const p of processes.filter((p) => p.running)) {
      p.kill('SIGKILL');
      await p.exited;
    }
    await h?.close();
    image?.remove();
    rmSync(root, { recursive: true, force: true });
  });

  /** A single-use enrollment token for `workerId`, made through the admin API. */
  const enrollToken = async (workerId: string) => {
    const res = await h.t.admin('POST', '/api/v1/enrollment-tokens', { workerId });
    expect(res.status).toBe(201);
    return (res.body as { token: string }).token;
  };

  /** Starts `command`, runs one Python task on it, stops it with SIGTERM; the worker's output on failure. */
  async function runPython(
    workerId: string,
    command: string[],
    options: { cwd: string; env: Record<string, string> },
  ) {
    // Both start the worker through its launcher (ADR 0046), which execs node in its place.
    const [launcher, ...args] = command;
    expect(launcher).toMatch(/(^|\/)bin\/ql-worker$/);
    // The one enrollment call gets the deadline the other process tests give it on a loaded machine.
    const env = { ...options.env, QL_WORKER_REQUEST_TIMEOUT_MS: String(ENROLL_REQUEST_TIMEOUT_MS) };
    const worker = new LoggedProcess(launcher!, args, { ...options, env });
    processes.push(worker);
    const transcript = () =>
      [...worker.lines.map((l) => JSON.stringify(l)), ...worker.stderr].slice(-30).join('\n');
    try {
      await worker.until(
        `${workerId} registered`,
        async () => worker.lines.find((l) => l.msg === 'worker registered'),
        {
          deadlineMs: WAIT_DEADLINE_MS,
        },
      );
      expect(worker.lines.find((l) => l.msg === 'worker machine class')).toMatchObject({ workerId });
      expect(worker.messages()).toContain('worker certificate enrolled');
      const runId = await h.trigger(await h.createTask({ runtime: 'python', command: PYTHON }));
      const run = await h.untilRunEnds(runId);
      expect({
        status: run.status,
        worker: run.attempts[0]?.workerId,
        exitCode: (run.attempts[0] as { exitCode?: number } | undefined)?.exitCode,
      }).toEqual({
        status: 'succeeded',
        worker: workerId,
        exitCode: 0,
      });
      expect(await h.output(runId, 'stdout')).toBe('py 3\n');
      worker.kill('SIGTERM');
      expect(await worker.exited).toEqual({ code: WORKER_EXIT.ok, signal: null });
    } catch (error) {
      throw new Error(`${(error as Error).message}\n--- ${workerId} ---\n${transcript()}`, { cause: error });
    }
  }

  it('Kubernetes: the worker container of deploy/kubernetes/worker-1.yaml, in the image', async () => {
    const docs = parseAllDocuments(read('deploy', 'kubernetes', 'worker-1.yaml')).map((d) => d.toJS() as any);
    const pod = docs.find((d) => d?.spec?.template?.spec?.containers)!.spec.template.spec;
    const container = pod.containers.find((c: any) => c.name === 'worker');
    const mounts = Object.fromEntries(
      container.volumeMounts.map((m: any) => [m.name, m.mountPath]),
    ) as Record<string, string>;
    const volume = (name: string) => pod.volumes.find((v: any) => v.name === name);
    const ca = folder('k8s-ca');
    mkdirSync(ca, { recursive: true });
    for (const item of volume('ca').configMap.items) {
      expect(item.key).toBe('ca.crt');
      copyFileSync(h.pki.caCertPath, join(ca, item.path));
    }
    const enroll = folder('k8s-enroll');
    mkdirSync(enroll, { recursive: true });
    const token = await enrollToken('worker-1');
    const secret = volume('enroll').secret;
    for (const item of secret.items) {
      expect(item.key).toBe('token');
      writeFileSync(join(enroll, item.path), token, { mode: secret.defaultMode });
    }
    const state = folder('k8s-state');
    mkdirSync(state, { recursive: true });
    chmodSync(state, 0o711);
    const env: Record<string, string> = {};
    for (const { name, value } of container.env as { name: string; value: string }[]) {
      let local = remap(remap(remap(value, mounts.ca!, ca), mounts.enroll!, enroll), mounts.state!, state);
      if (name === 'QL_WORKER_CONTROL_PLANE_URL') local = h.t.plane.ingressUrl;
      env[name] = local;
    }
    expect(env.QL_WORKER_ID).toBe('worker-1');
    await runPython('worker-1', container.command ?? container.args, {
      cwd: image.root,
      env: { ...env, PATH: image.path },
    });
  }, 180_000);

  it('systemd: deploy/systemd/qinglong-worker@.service, installed as docs/operations.md says', async () => {
    const service = parseUnit(read('deploy', 'systemd', 'qinglong-worker@.service')).Service!;
    const instance = 'router-7';
    const opt = folder('opt-qinglong-remote-worker');
    mkdirSync(opt, { recursive: true });
    // What docs/operations.md copies ("copy bin/, dist/, … into /opt/…"): dist/ from the build.
    const doc = read('docs', 'operations.md');
    const install = doc.slice(doc.indexOf('Installing it on a machine'));
    const copied = /copy ([^]*?) into \/opt\//.exec(install.replace(/\n#\s*/g, ' '))![1]!.split(/,? and |, /);
    for (const path of copied.map((p) => p.replace(/\/$/, '')))
      cpSync(path === 'dist' ? join(image.root, 'dist') : join(REPO_ROOT, path), join(opt, path), {
        recursive: true,
      });
    // The unit file the install puts in /etc/systemd/system is among what was copied.
    const unitSource = /sudo cp \/opt\/qinglong-remote-worker\/(\S+) \/etc\/systemd\/system\//.exec(
      install,
    )?.[1];
    expect(unitSource && existsSync(join(opt, unitSource))).toBe(true);
    symlinkSync(join(image.root, 'node_modules'), join(opt, 'node_modules'), 'dir'); // npm ci --omit=dev
    const etc = folder('etc-qinglong');
    const stateRoot = folder('var-lib');
    const onMachine = (path: string) => remap(remap(path, '/etc/qinglong', etc), '/var/lib', stateRoot);
    // The operator's files: the CA and the token (LoadCredential='s source); systemd copies it into %d.
    const token = await enrollToken(instance);
    for (const source of Object.values(unitCredentials(service, instance))) {
      mkdirSync(dirname(onMachine(source)), { recursive: true, mode: 0o700 });
      writeFileSync(onMachine(source), `${token}\n`, { mode: 0o600 });
    }
    const { env } = replayUnitStart(service, instance, { credentials: folder('credentials'), onMachine });
    mkdirSync(dirname(env.QL_WORKER_TLS_CA!), { recursive: true });
    copyFileSync(h.pki.caCertPath, env.QL_WORKER_TLS_CA!);
    // The EnvironmentFile's one line (docs/operations.md), and the task user's numeric stand-in.
    env.QL_WORKER_CONTROL_PLANE_URL = h.t.plane.ingressUrl;
    expect(env.QL_WORKER_RUN_AS).toBe('qinglong-task');
    env.QL_WORKER_RUN_AS = '10001:10001';
    expect(service.WorkingDirectory).toEqual(['/opt/qinglong-remote-worker']);
    // systemd's default PATH for services, with the node of this test first (the host's node).
    env.PATH = `${dirname(process.execPath)}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin`;
    const execStart = service
      .ExecStart![0]!.split(/\s+/)
      .map((word) => remap(word, service.WorkingDirectory![0]!, opt));
    await runPython(instance, execStart, { cwd: opt, env });
  }, 180_000);
});
