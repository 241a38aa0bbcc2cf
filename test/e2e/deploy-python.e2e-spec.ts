/**
 * Issue 16 item 10: a Python task runs through the worker command lines the Kubernetes manifest and
 * the systemd unit ship (test/e2e/compose.e2e-spec.ts does the same for Compose). No kubelet, no
 * systemd and no Docker engine here, so what stands in for them:
 * - Kubernetes: the image is replayed (test/support/docker-emulation.ts: its COPY steps, the build,
 *   the production packages; PATH offers only the task runtimes the image installs); the worker
 *   container's `args` and `env` run as a process in the image's WORKDIR; the Secret's items are files
 *   in a folder standing for its mountPath, the `state` volume a 0711 folder; the control plane's
 *   Service URL becomes a test control plane's ingress. Capabilities, seccomp and the read-only root
 *   are not applied.
 * - systemd: the install of docs/operations.md is replayed: bin/, dist/ (from the replayed build),
 *   deploy/, package.json and package-lock.json copied into a folder standing for WorkingDirectory, the
 *   production packages linked; ExecStart (the launcher, under that folder) runs there with the unit's
 *   Environment= lines (`%i` the instance), the EnvironmentFile's URL and systemd's default PATH; /etc/qinglong and the StateDirectory become temp folders.
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
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { WORKER_EXIT } from '../../apps/worker/src/worker-exit';
import { LoggedProcess } from '../support/child-process';
import { REPO_ROOT, ReplayedImage, parseDockerfile, replayImage } from '../support/docker-emulation';
import { RemoteRunHarness, WAIT_DEADLINE_MS } from '../support/remote-run-harness';
import { parseUnit } from '../support/systemd-unit';

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
      RemoteRunHarness.start('sqlite', ['worker-1', 'router-7']),
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

  /** Starts `command`, runs one Python task on it, stops it with SIGTERM; the worker's output on failure. */
  async function runPython(
    workerId: string,
    command: string[],
    options: { cwd: string; env: Record<string, string> },
  ) {
    // Both start the worker through its launcher (ADR 0046), which execs node in its place.
    const [launcher, ...args] = command;
    expect(launcher).toMatch(/(^|\/)bin\/ql-worker$/);
    const worker = new LoggedProcess(launcher!, args, options);
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
    const secret = pod.volumes.find((v: any) => v.name === 'worker-tls').secret;
    const tls = folder('k8s-worker-tls');
    mkdirSync(tls, { recursive: true });
    const pair = h.pki.workers['worker-1']!;
    const sources: Record<string, string> = {
      'ca.crt': h.pki.caCertPath,
      'tls.crt': pair.certPath,
      'tls.key': pair.keyPath,
    };
    for (const item of secret.items) copyFileSync(sources[item.key]!, join(tls, item.path));
    const state = folder('k8s-state');
    mkdirSync(state, { recursive: true });
    chmodSync(state, 0o711);
    const env: Record<string, string> = {};
    for (const { name, value } of container.env as { name: string; value: string }[]) {
      let local = remap(remap(value, mounts['worker-tls']!, tls), mounts.state!, state);
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
    mkdirSync(join(etc, 'pki', 'workers'), { recursive: true });
    copyFileSync(h.pki.caCertPath, join(etc, 'pki', 'ca.crt'));
    copyFileSync(h.pki.workers[instance]!.certPath, join(etc, 'pki', 'workers', `${instance}.crt`));
    copyFileSync(h.pki.workers[instance]!.keyPath, join(etc, 'pki', 'workers', `${instance}.key`));
    const stateRoot = folder('var-lib');
    const stateDirectory = service.StateDirectory![0]!.replace(/%i/g, instance);
    mkdirSync(join(stateRoot, stateDirectory), { recursive: true });
    chmodSync(join(stateRoot, stateDirectory), Number.parseInt(service.StateDirectoryMode![0]!, 8));
    const env: Record<string, string> = {};
    for (const line of service.Environment!) {
      const [name, value] = [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)];
      env[name] = remap(remap(value.replace(/%i/g, instance), '/etc/qinglong', etc), '/var/lib', stateRoot);
    }
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
