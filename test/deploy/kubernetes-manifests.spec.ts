/**
 * R-OPS-6, R-OPS-8: deploy/kubernetes/ read as kubectl would (multi-document YAML listed by the
 * kustomization) and checked against the app itself: settings names and values through the config
 * loaders, ports and TLS paths from the effective settings, probe paths from the health controller.
 * No cluster here: what a reviewer would check by eye is asserted instead.
 */
import 'reflect-metadata';
import { PATH_METADATA } from '@nestjs/common/constants';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, posix } from 'node:path';
import { parse, parseAllDocuments } from 'yaml';
import { SETTINGS, loadConfig } from '../../apps/control-plane/src/config/config';
import { HealthController } from '../../apps/control-plane/src/health/health.controller';
import { WORKER_SETTINGS, loadWorkerConfig } from '../../apps/worker/src/config/worker-config';
import { CONTROL_PLANE_NODE_FLAGS } from '../../apps/control-plane/src/node-flags';
import { MachineClass, workerNodeFlags } from '../../apps/worker/src/node-flags';
import { REPO_ROOT } from '../support/docker-emulation';
import { FakeHost, LAUNCHER, gib, removeFixtureEntry, runLauncher } from '../support/worker-launcher';

const DIR = join(REPO_ROOT, 'deploy', 'kubernetes');

/* eslint-disable @typescript-eslint/no-explicit-any -- Kubernetes objects, read as plain YAML */
type K8s = any;
const kustomization = parse(readFileSync(join(DIR, 'kustomization.yaml'), 'utf8')) as K8s;
const resources: K8s[] = (kustomization.resources as string[]).flatMap((file) =>
  parseAllDocuments(readFileSync(join(DIR, file), 'utf8')).map((doc) => {
    if (doc.errors.length > 0) throw new Error(`${file}: ${doc.errors[0]!.message}`);
    return doc.toJS() as K8s;
  }),
);
const ofKind = (kind: string) => resources.filter((r) => r.kind === kind);
const named = (kind: string, name: string) => ofKind(kind).find((r) => r.metadata.name === name);
const workloads = [...ofKind('Deployment'), ...ofKind('Job')];
const containers = workloads.flatMap((w) =>
  (w.spec.template.spec.containers as K8s[]).map((c) => ({ workload: w, pod: w.spec.template.spec, c })),
);

/** What a container's environment will hold; Secret values are stand-ins of the right shape. */
function containerEnv(c: K8s): Record<string, string> {
  const env: Record<string, string> = {};
  for (const from of c.envFrom ?? []) {
    const map = named('ConfigMap', from.configMapRef?.name);
    if (!map) throw new Error(`${c.name}: envFrom names no ConfigMap of the kustomization`);
    Object.assign(env, map.data);
  }
  for (const e of c.env ?? []) {
    if (e.value !== undefined) env[e.name] = String(e.value);
    else if (e.valueFrom?.secretKeyRef && e.name === 'QL_DATABASE_URL')
      env[e.name] = 'postgres://ql:pw@db:5432/ql';
    else throw new Error(`${c.name}: ${e.name} has a source this test does not know`);
  }
  return env;
}

const profile = (c: K8s) => containerEnv(c).QL_PROFILE;
const controlPlane = containers.find(
  ({ workload, c }) => workload.kind === 'Deployment' && profile(c) === 'cluster-control',
)!;
const workers = containers.filter(({ c }) => profile(c) === 'worker');
const controlPlaneConfig = loadConfig(containerEnv(controlPlane.c));
const selects = (selector: Record<string, string>, labels: Record<string, string>) =>
  Object.entries(selector).every(([k, v]) => labels[k] === v);
const portNumber = (c: K8s, port: string | number) =>
  typeof port === 'number' ? port : (c.ports as K8s[]).find((p) => p.name === port)?.containerPort;
const probePath = (method: 'livez' | 'readyz') =>
  `/${Reflect.getMetadata(PATH_METADATA, HealthController.prototype[method]) as string}`;

/** The file a path in the container resolves to: a key of a Secret or ConfigMap mounted read-only above it. */
function mountedKey(
  pod: K8s,
  c: K8s,
  file: string,
): { kind: 'secret' | 'configMap'; name: string; key: string } | undefined {
  for (const mount of c.volumeMounts ?? []) {
    const rel = posix.relative(mount.mountPath, file);
    if (rel.startsWith('..') || rel.includes('/') || !mount.readOnly) continue;
    const volume = (pod.volumes as K8s[]).find((v) => v.name === mount.name);
    for (const kind of ['secret', 'configMap'] as const) {
      const source = volume?.[kind];
      const item = (source?.items as K8s[] | undefined)?.find((i) => i.path === rel);
      if (source && item)
        return { kind, name: kind === 'secret' ? source.secretName : source.name, key: item.key };
    }
  }
  return undefined;
}
const secretFile = (pod: K8s, c: K8s, file: string) => {
  const found = mountedKey(pod, c, file);
  return found?.kind === 'secret' ? { secret: found.name, key: found.key } : undefined;
};

/** The writable PersistentVolumeClaim a path in the container lies in (its claim name). */
function claimOf(pod: K8s, c: K8s, file: string): string | undefined {
  for (const mount of c.volumeMounts ?? []) {
    if (mount.readOnly || !file.startsWith(`${mount.mountPath}/`)) continue;
    const claim = (pod.volumes as K8s[]).find((v) => v.name === mount.name)?.persistentVolumeClaim;
    if (claim) return claim.claimName;
  }
  return undefined;
}

/**
 * A worker's settings as its process reads them. Its token file is a key of a Secret created out of
 * band (asserted below): a file with a stand-in token takes its place, so the loader reads a file.
 */
const tokenDir = mkdtempSync(join(tmpdir(), 'ql-k8s-token-'));
const standInToken = join(tokenDir, 'token');
writeFileSync(standInToken, `qlet_${'A'.repeat(43)}\n`, { mode: 0o600 });
afterAll(() => rmSync(tokenDir, { recursive: true, force: true }));
const workerConfigOf = (c: K8s) =>
  loadWorkerConfig({ ...containerEnv(c), QL_WORKER_ENROLL_TOKEN_FILE: standInToken });

describe('Kubernetes manifests (deploy/kubernetes)', () => {
  it('the kustomization lists every manifest of the folder, all in one namespace, on one image', () => {
    const files = readdirSync(DIR).filter((f) => f.endsWith('.yaml') && f !== 'kustomization.yaml');
    expect([...kustomization.resources].sort()).toEqual(files.sort());
    expect(kustomization.namespace).toBe(named('Namespace', kustomization.namespace)?.metadata.name);
    const images = new Set(containers.map(({ c }) => c.image));
    expect([...images]).toEqual([kustomization.images[0].name]);
  });

  it('every container runs an entry point of the build through the image ENTRYPOINT, with only known settings', () => {
    for (const { c, workload } of containers) {
      expect({ name: c.name, command: c.command }).toEqual({ name: c.name, command: undefined }); // keeps tini
      if (profile(c) === 'worker') {
        // A worker starts through the launcher, which picks its V8 flags (ADR 0046; see below).
        expect({ name: c.name, args: c.args }).toEqual({ name: c.name, args: [LAUNCHER] });
      } else {
        const [node, ...args] = c.args as string[];
        expect(node).toBe('node');
        // The control plane runs under the V8 flags of ADR 0020 (the migrate Job is a one-shot CLI
        // command: none).
        const flags = workload.kind === 'Job' ? [] : CONTROL_PLANE_NODE_FLAGS;
        expect({ name: c.name, flags: args.slice(0, flags.length) }).toEqual({ name: c.name, flags });
        const script = args[flags.length];
        expect(existsSync(join(REPO_ROOT, script!.replace(/^dist\//, '').replace(/\.js$/, '.ts')))).toBe(
          true,
        );
      }
      const env = containerEnv(c);
      const known =
        profile(c) === 'worker'
          ? ['QL_PROFILE', ...WORKER_SETTINGS.map((s) => s.env)]
          : SETTINGS.map((s) => (s as { env: string }).env);
      expect({ name: c.name, unknown: Object.keys(env).filter((k) => !known.includes(k)) }).toEqual({
        name: c.name,
        unknown: [],
      });
      if (profile(c) === 'worker') workerConfigOf(c);
      else expect(loadConfig(env).profile).toBe('cluster-control');
    }
    const migrate = containers.find(({ workload }) => workload.kind === 'Job')!;
    expect(migrate.c.args).toEqual(['node', 'dist/apps/control-plane/src/cli.js', 'migrate']);
    expect(containerEnv(migrate.c).QL_DATABASE_URL).toBe(containerEnv(controlPlane.c).QL_DATABASE_URL);
    expect(migrate.pod.restartPolicy).toMatch(/^(OnFailure|Never)$/);
  });

  it('the control plane: 2 replicas, a PodDisruptionBudget, startup/liveness/readiness probes on the admin port and the app’s probe paths', () => {
    const { workload, c } = controlPlane;
    expect(workload.spec.replicas).toBe(2);
    const labels = workload.spec.template.metadata.labels;
    expect(selects(workload.spec.selector.matchLabels, labels)).toBe(true);
    const [pdb] = ofKind('PodDisruptionBudget');
    expect(selects(pdb.spec.selector.matchLabels, labels)).toBe(true);
    expect(pdb.spec.minAvailable).toBeGreaterThanOrEqual(1);
    expect(pdb.spec.minAvailable).toBeLessThan(workload.spec.replicas);

    expect((c.ports as K8s[]).map((p) => p.containerPort).sort()).toEqual(
      [controlPlaneConfig.adminPort, controlPlaneConfig.ingressPort].sort(),
    );
    expect(controlPlaneConfig).toMatchObject({ adminHost: '0.0.0.0', ingressHost: '0.0.0.0' });
    const probes = {
      startup: c.startupProbe.httpGet,
      liveness: c.livenessProbe.httpGet,
      readiness: c.readinessProbe.httpGet,
    };
    expect(probes).toEqual({
      startup: { path: probePath('livez'), port: expect.anything() },
      liveness: { path: probePath('livez'), port: expect.anything() },
      readiness: { path: probePath('readyz'), port: expect.anything() },
    });
    for (const probe of Object.values(probes))
      expect(portNumber(c, probe.port)).toBe(controlPlaneConfig.adminPort);
    const graceMs = controlPlane.pod.terminationGracePeriodSeconds * 1000;
    expect(graceMs).toBeGreaterThan(controlPlaneConfig.shutdownGraceMs);
  });

  it('Services: the admin API inside the cluster, the worker ingress passed through, each to the right container port', () => {
    const admin = named('Service', 'ql-admin');
    const ingress = named('Service', 'ql-ingress');
    expect(admin.spec.type).toBe('ClusterIP');
    expect(ingress.spec.type).toBe('LoadBalancer');
    const labels = controlPlane.workload.spec.template.metadata.labels;
    for (const [service, port] of [
      [admin, controlPlaneConfig.adminPort],
      [ingress, controlPlaneConfig.ingressPort],
    ] as const) {
      expect(selects(service.spec.selector, labels)).toBe(true);
      expect(service.spec.ports).toHaveLength(1);
      expect(portNumber(controlPlane.c, service.spec.ports[0].targetPort)).toBe(port);
    }
  });

  it('control-plane TLS files and the worker issuer are keys of read-only Secret volumes at exactly the QL_TLS_* / QL_WORKER_ISSUER_* paths', () => {
    const files = (pod: K8s, c: K8s, paths: string[]) => paths.map((p) => secretFile(pod, c, p));
    const cp = files(controlPlane.pod, controlPlane.c, [
      controlPlaneConfig.tlsCaPath,
      controlPlaneConfig.tlsCertPath,
      controlPlaneConfig.tlsKeyPath,
    ]);
    expect(cp.map((f) => f?.key)).toEqual(['ca.crt', 'tls.crt', 'tls.key']);
    expect(new Set(cp.map((f) => f?.secret)).size).toBe(1);
    // Enrollment is on: the issuer's certificate and key, one Secret of the control plane's own.
    const issuer = files(controlPlane.pod, controlPlane.c, [
      controlPlaneConfig.workerIssuerCertPath,
      controlPlaneConfig.workerIssuerKeyPath,
    ]);
    expect(issuer.map((f) => f?.key)).toEqual(['tls.crt', 'tls.key']);
    expect(issuer[0]!.secret).toBe(issuer[1]!.secret);
    expect(controlPlaneConfig.workerIssuerKeyPem).toBe('');
    for (const { pod } of [controlPlane, ...workers]) {
      for (const v of (pod.volumes as K8s[]).filter((v) => v.secret))
        expect(v.secret.defaultMode).toBe(0o440);
    }
  });

  it('workers join by enrollment: the token a key of a Secret of their own, mounted as a file; the CA from a ConfigMap; key and certificate written to a claim of their own; no worker Secret holds a private key', () => {
    expect(workers.length).toBeGreaterThan(0);
    const tokenSecrets = new Set<string>();
    const claims = new Set<string>();
    const cpSecrets = (controlPlane.pod.volumes as K8s[])
      .filter((v) => v.secret)
      .map((v) => v.secret.secretName);
    for (const { pod, c } of workers) {
      const env = containerEnv(c);
      const config = workerConfigOf(c);
      // The token is never in the environment (/proc/<pid>/environ): a file, a Secret's key.
      expect(env.QL_WORKER_ENROLL_TOKEN).toBeUndefined();
      const token = mountedKey(pod, c, env.QL_WORKER_ENROLL_TOKEN_FILE!);
      expect(token).toEqual({ kind: 'secret', name: expect.stringContaining(config.workerId), key: 'token' });
      expect(cpSecrets).not.toContain(token!.name);
      tokenSecrets.add(token!.name);
      // The CA: public, a ConfigMap's key (a Secret's would do too).
      expect(mountedKey(pod, c, config.tlsCaPath)).toMatchObject({ key: 'ca.crt' });
      // Key and certificate: the worker's own files in its own writable claim, which outlives the pod.
      const claim = claimOf(pod, c, config.tlsKeyPath);
      expect(claim).toEqual(expect.stringContaining(config.workerId));
      expect(claimOf(pod, c, config.tlsCertPath)).toBe(claim);
      expect(named('PersistentVolumeClaim', claim!)?.spec.accessModes).toEqual(['ReadWriteOnce']);
      // Everything else it writes is there too (the root filesystem is read-only).
      for (const folder of [config.journalDir, config.workDir, config.bundleCacheDir])
        expect({ folder, claim: claimOf(pod, c, folder) }).toEqual({ folder, claim });
      claims.add(claim!);
      // No Secret a worker mounts holds a private key.
      for (const v of (pod.volumes as K8s[]).filter((v) => v.secret))
        for (const item of v.secret.items as K8s[])
          expect({ secret: v.secret.secretName, key: item.key }).toEqual({
            secret: v.secret.secretName,
            key: expect.not.stringMatching(/key|crt|pem/i),
          });
    }
    expect(tokenSecrets.size).toBe(workers.length);
    expect(claims.size).toBe(workers.length);
  });

  it('workers: one pod per worker id (replicas 1, Recreate), dialling the ingress Service, restarted by the kubelet with back-off', () => {
    const ingress = named('Service', 'ql-ingress');
    const ids = new Set<string>();
    for (const { workload, pod, c } of workers) {
      const config = workerConfigOf(c);
      ids.add(config.workerId);
      expect(workload.spec).toMatchObject({ replicas: 1, strategy: { type: 'Recreate' } });
      // One origin: the Service spreads the connections over the replicas.
      expect(config.controlPlaneOrigins).toHaveLength(1);
      const url = new URL(config.controlPlaneOrigins[0]!);
      expect(url.hostname.split('.')[0]).toBe(ingress.metadata.name);
      expect(Number(url.port)).toBe(ingress.spec.ports[0].port);
      // A Deployment's pods always restart (CrashLoopBackOff back-off): a fenced worker comes back.
      expect(pod.restartPolicy ?? 'Always').toBe('Always');
      expect(pod.terminationGracePeriodSeconds * 1000).toBeGreaterThan(config.stopBudgetMs);
    }
    expect(ids.size).toBe(workers.length);
  });

  it("a worker's memory limit decides its V8 flags: the launcher, in a container with that cgroup limit on a large node, picks the class ADR 0046 asks for", async () => {
    expect(workers.length).toBeGreaterThan(0);
    const bytes = (quantity: string) => {
      const m = /^(\d+)(Ki|Mi|Gi)?$/.exec(quantity);
      if (!m) throw new Error(`memory quantity ${quantity}: this test reads Ki, Mi, Gi only`);
      return Number(m[1]) * { '': 1, Ki: 1024, Mi: 1024 ** 2, Gi: 1024 ** 3 }[m[2] ?? '']!;
    };
    try {
      for (const { c } of workers) {
        const limit = bytes(c.resources.limits.memory);
        // A container has its own cgroup namespace: its cgroup is the root of its /sys/fs/cgroup.
        const host = new FakeHost()
          .cgroup('0::/')
          .file('sys/fs/cgroup/memory.max', `${limit}\n`)
          .memTotal(gib(64));
        const env = containerEnv(c);
        const run = await runLauncher(
          host,
          env.QL_WORKER_MACHINE_CLASS ? { QL_WORKER_MACHINE_CLASS: env.QL_WORKER_MACHINE_CLASS } : {},
        );
        host.remove();
        const expected = (env.QL_WORKER_MACHINE_CLASS ??
          (limit <= gib(1) ? 'small' : 'large')) as MachineClass;
        expect({ name: c.name, limit, class: run.classLine?.machineClass, flags: run.saw?.execArgv }).toEqual(
          {
            name: c.name,
            limit,
            class: expected,
            flags: [...workerNodeFlags(expected)],
          },
        );
      }
      // The shipped worker-1: 256Mi, so small (--lite-mode), as ADR 0014 measured for a router.
      expect(workers.map(({ c }) => c.resources.limits.memory)).toEqual(['256Mi']);
    } finally {
      removeFixtureEntry();
    }
  });

  it('every pod runs as non-root (a worker: its tasks, test/deploy/task-user.spec.ts) without privilege escalation, with resource requests and limits', () => {
    for (const { workload, pod, c } of containers) {
      const where = `${workload.kind}/${workload.metadata.name}`;
      const nonRoot =
        profile(c) === 'worker' ? containerEnv(c).QL_WORKER_RUN_AS : pod.securityContext?.runAsNonRoot;
      expect({ where, nonRoot: Boolean(nonRoot) }).toEqual({ where, nonRoot: true });
      if (profile(c) !== 'worker')
        expect({ where, uid: pod.securityContext?.runAsUser > 0 }).toEqual({ where, uid: true });
      expect({ where, ...c.securityContext }).toMatchObject({
        where,
        allowPrivilegeEscalation: false,
        readOnlyRootFilesystem: true,
        capabilities: { drop: ['ALL'] },
      });
      expect({ where, requests: c.resources?.requests, limit: c.resources?.limits?.memory }).toEqual({
        where,
        requests: { cpu: expect.any(String), memory: expect.any(String) },
        limit: expect.any(String),
      });
    }
  });
});
