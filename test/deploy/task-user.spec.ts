/**
 * Issue 15 item 9, ADR 0031: every shipped deployment runs a worker's tasks as another, unprivileged
 * user (QL_WORKER_RUN_AS) and the worker with exactly the capabilities that takes (run-as.ts
 * RUN_AS_CAPABILITIES), none of them ambient and no privilege regained through exec. The files are
 * read as written; test/e2e/worker-run-as.e2e-spec.ts runs a worker under this capability set.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse, parseAllDocuments } from 'yaml';
import { RunAsSpec, loadWorkerConfig } from '../../apps/worker/src/config/worker-config';
import { RUN_AS_CAPABILITIES } from '../../apps/worker/src/executor/run-as';
import { REPO_ROOT, instructions, loadCompose, parseDockerfile } from '../support/docker-emulation';

/* eslint-disable @typescript-eslint/no-explicit-any -- deployment files, read as plain YAML */
const read = (...path: string[]) => readFileSync(join(REPO_ROOT, ...path), 'utf8');
const runAs = (value: string | undefined): RunAsSpec | null =>
  loadWorkerConfig({ QL_WORKER_RUN_AS: value ?? '' }).runAs;
const sorted = (list: readonly string[] | undefined) => [...(list ?? [])].sort();

const stages = parseDockerfile(read('Dockerfile'));
const image = stages[stages.length - 1]!;
const imageEnv = Object.fromEntries(
  instructions(image, 'ENV').map((e) => [e.slice(0, e.indexOf('=')), e.slice(e.indexOf('=') + 1)]),
);
/** The image's task user: numeric ids, so Compose and Kubernetes need no lookup. */
const imageTaskUser = runAs(imageEnv.QL_WORKER_RUN_AS) as { uid: number; gid: number };

describe('tasks run as another user in every deployment (ADR 0031)', () => {
  it('the Dockerfile creates an unprivileged task user with fixed ids and makes it the default', () => {
    expect(imageTaskUser).toEqual({ uid: expect.any(Number), gid: expect.any(Number) });
    // Not root (refused by the parser), not the image's `node` user (1000) the control plane runs as.
    expect(imageTaskUser.uid).not.toBe(1000);
    const runs = instructions(image, 'RUN').join('\n');
    expect(runs).toMatch(
      new RegExp(`useradd --system --uid ${imageTaskUser.uid} --gid ${imageTaskUser.gid} `),
    );
    expect(runs).toMatch(/--shell \/usr\/sbin\/nologin/);
    // The worker's state folder (where a named volume starts from) is root's 0711, not the node user's.
    expect(runs).toMatch(/chmod 0711 \/var\/lib\/qinglong\/worker/);
    expect(runs).not.toMatch(/chown -R node:node \/var\/lib\/qinglong\b(?!\/pki)/);
  });

  it('Compose: each worker as root with only the four capabilities, no-new-privileges, tasks as the image’s user; the setup job leaves every key and the token unreadable to it', () => {
    const compose = loadCompose() as { services: Record<string, any> };
    const workers = Object.values(compose.services).filter((s) => s.environment?.QL_PROFILE === 'worker');
    expect(workers.length).toBeGreaterThan(0);
    const setup = compose.services.setup;
    const pki = setup.environment.QL_DEV_PKI_DIR as string;
    const join_ = setup.environment.JOIN_DIR as string;
    for (const s of workers) {
      expect({ user: s.user, drop: s.cap_drop, add: sorted(s.cap_add), opts: s.security_opt }).toEqual({
        user: '0:0',
        drop: ['ALL'],
        add: [...RUN_AS_CAPABILITIES],
        opts: ['no-new-privileges:true'],
      });
      expect(runAs(s.environment.QL_WORKER_RUN_AS)).toEqual(imageTaskUser);
      // Its key is its own (made by the worker, root's 0600, in its state volume), none of the PKI's.
      expect(s.environment.QL_WORKER_TLS_KEY.startsWith(`${pki}/`)).toBe(false);
      expect(s.environment.QL_WORKER_ENROLL_TOKEN_FILE.startsWith(`${join_}/`)).toBe(true);
    }
    const script = (setup.command as string[]).join(' ');
    // The token's folder: root's (the workers' user; root without CAP_DAC_OVERRIDE reads only its own), 0700.
    expect(script).toContain('&& chmod 0700 "$JOIN_DIR"');
    expect(script).toContain('&& cd "$QL_DEV_PKI_DIR" &&');
    // The control planes' keys become their user's; the PKI folders 0711.
    expect(script).toMatch(/chown 1000:1000 server\.key worker-issuer\.key /);
    expect(script).toMatch(/chmod 0711 \. workers$/);
    expect({ user: setup.user, drop: setup.cap_drop }).toEqual({ user: '0:0', drop: ['ALL'] });
  });

  it('Kubernetes: each worker container as root with only the four capabilities, no privilege escalation, tasks as the image’s user; its Secret unreadable to others', () => {
    const dir = join(REPO_ROOT, 'deploy', 'kubernetes');
    const files = (parse(read('deploy', 'kubernetes', 'kustomization.yaml')) as { resources: string[] })
      .resources;
    const pods = files
      .flatMap((f) => parseAllDocuments(readFileSync(join(dir, f), 'utf8')).map((d) => d.toJS() as any))
      .filter((r) => r.kind === 'Deployment')
      .map((r) => r.spec.template.spec);
    const workers = pods.filter((pod) =>
      pod.containers.some((c: any) =>
        c.env?.some((e: any) => e.name === 'QL_PROFILE' && e.value === 'worker'),
      ),
    );
    expect(workers.length).toBeGreaterThan(0);
    for (const pod of workers) {
      const [c] = pod.containers;
      expect({ uid: pod.securityContext.runAsUser, fsGroup: pod.securityContext.fsGroup }).toEqual({
        uid: 0,
        fsGroup: undefined, // Secret files stay root's (0440): the task user is not in their group
      });
      expect({ ...c.securityContext, add: sorted(c.securityContext.capabilities.add) }).toMatchObject({
        allowPrivilegeEscalation: false,
        capabilities: { drop: ['ALL'] },
        add: [...RUN_AS_CAPABILITIES],
      });
      const env = Object.fromEntries(c.env.map((e: any) => [e.name, e.value]));
      expect(runAs(env.QL_WORKER_RUN_AS)).toEqual(imageTaskUser);
      for (const v of pod.volumes.filter((v: any) => v.secret)) expect(v.secret.defaultMode & 0o007).toBe(0);
    }
  });

  it('systemd: the worker as root with a bounding set of the four capabilities, none ambient, no new privileges, tasks as a user of their own', () => {
    const service: Record<string, string[]> = {};
    for (const line of read('deploy', 'systemd', 'qinglong-worker@.service').split('\n')) {
      const eq = line.indexOf('=');
      if (eq > 0 && !line.startsWith('#')) (service[line.slice(0, eq)] ??= []).push(line.slice(eq + 1));
    }
    expect({ User: service.User, Group: service.Group }).toEqual({ User: undefined, Group: undefined });
    expect({
      bounding: sorted(service.CapabilityBoundingSet?.[0]?.split(/\s+/)),
      ambient: service.AmbientCapabilities,
      noNewPrivileges: service.NoNewPrivileges,
    }).toEqual({
      bounding: RUN_AS_CAPABILITIES.map((c) => `CAP_${c}`),
      ambient: [''],
      noNewPrivileges: ['yes'],
    });
    const env = Object.fromEntries(service.Environment!.map((e) => e.split('=') as [string, string]));
    expect(runAs(env.QL_WORKER_RUN_AS)).toEqual({ user: 'qinglong-task' });
    // The state folder is root's; tasks pass through it to their run folders (the journal is 0700).
    expect(service.StateDirectoryMode).toEqual(['0711']);
  });
});
