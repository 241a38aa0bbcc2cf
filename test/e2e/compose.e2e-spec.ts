// Size: one Compose stack, read as written and then run as processes (job, replicas, workers, a Python run); split, it would start twice.
/**
 * R-OPS-5, R-OPS-8: docker-compose.yml and the Dockerfile, read as written and then run as real
 * processes on this machine, which has no Docker. What stands in for Docker:
 * - the image: the Dockerfile is replayed into temp folders (test/support/docker-emulation.ts): its
 *   COPY steps, `npm run build`, and `npm ci --omit=dev` as links to the production packages only,
 *   so the services run the compiled `dist/` the image holds; ENTRYPOINT (tini) is left out;
 * - a service's command: its `command`, else the final stage's CMD, run in that folder (its WORKDIR);
 * - postgres: a fresh test database; QL_DATABASE_URL keeps the compose URL but its host, port,
 *   database and role become the test server's (after asserting it names the `postgres` service);
 * - volumes: each named volume is a temp folder; an env value under a mount path points into it;
 * - ports: QL_ADMIN_PORT and QL_INGRESS_PORT become 0 (a free port, read back from the replica's
 *   "control plane ready" line), QL_ADMIN_HOST and QL_INGRESS_HOST become 127.0.0.1, and a worker's
 *   https://<service>:<container port> becomes that replica's ingress on 127.0.0.1;
 * - healthchecks: the `CMD` runs as a process with the service's environment (its real ports);
 * - task runtimes: the services run on this machine's `sh`, `node` and `python3`, but a runtime the
 *   image would lack (`python3` unless the runtime stage `apt-get install`s it; TASK_RUNTIMES) is
 *   shadowed on the services' PATH by a stub that fails like a missing command. apt-get itself, tini
 *   and the image's users are not replayed; tasks run as QL_WORKER_RUN_AS's uid on this machine.
 */
import { X509Certificate } from 'node:crypto';
import {
  chmodSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SETTINGS, loadConfig } from '../../apps/control-plane/src/config/config';
import { WORKER_SETTINGS, loadWorkerConfig } from '../../apps/worker/src/config/worker-config';
import { WORKER_EXIT } from '@ql/contracts';
import { CONTROL_PLANE_NODE_FLAGS } from '../../apps/control-plane/src/node-flags';
import { LoggedProcess } from '../support/child-process';
import { LAUNCHER } from '../support/worker-launcher';
import { TestPostgresDatabase, createPostgresDatabase } from '../support/databases';
import {
  REPO_ROOT,
  ReplayedImage,
  TASK_RUNTIMES,
  aptPackages,
  copyParts,
  durationMs,
  execForm,
  instructions,
  loadCompose,
  parseDockerfile,
  replayImage,
  run,
} from '../support/docker-emulation';

const compose = loadCompose();
const stages = parseDockerfile(readFileSync(join(REPO_ROOT, 'Dockerfile'), 'utf8'));
const finalStage = stages[stages.length - 1]!;
const services = Object.entries(compose.services);
const names = (test: (env: Record<string, string>) => boolean) =>
  services.filter(([, s]) => test(s.environment ?? {})).map(([name]) => name);
const controlPlanes = names((env) => env.QL_PROFILE === 'cluster-control');
const workers = names((env) => env.QL_PROFILE === 'worker');
const jobs = services.filter(([, s]) => s.restart === 'no').map(([name]) => name);
const env = (name: string) => compose.services[name]!.environment ?? {};
const jobScript = (compose.services[jobs[0] ?? '']?.command ?? []).join(' ');
const optionValues = (option: string) =>
  [...jobScript.matchAll(new RegExp(`--${option} (\\S+)`, 'g'))].map((m) =>
    m[1]!.replace(/^(['"])(.*)\1$/, '$2'),
  );
/** Where a service mounts a named volume (`volume:/path[:ro]`), and whether read-only. */
const mountOf = (name: string, volume: string) => {
  const mount = (compose.services[name]!.volumes ?? []).find((v) => v.split(':')[0] === volume);
  return mount === undefined
    ? undefined
    : { target: mount.split(':')[1]!, readOnly: mount.split(':')[2] === 'ro' };
};
const mountedVolumes = (name: string) => (compose.services[name]!.volumes ?? []).map((v) => v.split(':')[0]!);
/** The job's shell variable `$NAME` as the container sees it (its environment). */
const expand = (text: string) => text.replace(/\$(\w+)/g, (_, v: string) => env(jobs[0]!)[v] ?? '');
/**
 * A replica or worker start is seconds on an idle machine; a cluster-control replica took 22 s to say
 * ready at a load of 16 on 2 cores, past the child-process default of 20 s.
 */
const START_MS = 90_000;
/**
 * Everything else awaited here (a healthcheck passing, both replicas listing both workers) is polled
 * until this deadline, not the child-process default of 20 s: each healthcheck is a new node process
 * (seconds under load, its own 3 s timeout), so 20 s was a handful of tries on a loaded machine.
 */
const SETTLE_MS = 90_000;
/** Replaying the image runs `npm run build` (tsc): about a minute idle, several at a load of 8+ on 2 cores. */
const IMAGE_MS = 900_000;
const ingressTarget = (url: string) => {
  const { hostname, port } = new URL(url);
  return { service: hostname, port };
};

describe('docker-compose.yml and the Dockerfile, as written', () => {
  it('the image is multi-stage: the final stage installs production dependencies only, runs as a non-root user and starts the control plane', () => {
    expect(stages.length).toBeGreaterThanOrEqual(2);
    // The runtime stage copies the native module built in the build stage: same base image.
    expect(new Set(stages.map((s) => s.from)).size).toBe(1);
    expect(stages[0]!.from).toMatch(/^node:\d+/);
    expect(instructions(stages[0]!, 'RUN')).toContain('npm run build');
    expect(instructions(finalStage, 'RUN').some((r) => /\bnpm ci --omit=dev\b/.test(r))).toBe(true);
    expect(instructions(finalStage, 'RUN').some((r) => /\bnpm (ci|install)\b(?!.*--omit=dev)/.test(r))).toBe(
      false,
    );
    const users = instructions(finalStage, 'USER');
    expect(users.length).toBeGreaterThan(0);
    expect(users[users.length - 1]).not.toMatch(/^(root|0)(:|$)/);
    expect(instructions(finalStage, 'ENV')).toContain('NODE_ENV=production');
    expect(execForm(instructions(finalStage, 'CMD').pop()!)).toEqual([
      'node',
      ...CONTROL_PLANE_NODE_FLAGS,
      'dist/apps/control-plane/src/main.js',
    ]);
    // The context leaves out local state and keys, and nothing a COPY needs (plain-path patterns).
    const ignored = readFileSync(join(REPO_ROOT, '.dockerignore'), 'utf8').split('\n');
    expect(ignored).toEqual(expect.arrayContaining(['node_modules', 'dist', 'var', '.git']));
    const copied = stages
      .flatMap((stage) => instructions(stage, 'COPY').map(copyParts))
      .filter((c) => c.from === undefined)
      .flatMap((c) => c.paths);
    const plain = ignored.filter((p) => p && !p.startsWith('#') && !/[*?[!]/.test(p));
    expect(copied.filter((src) => plain.some((p) => src === p || src.startsWith(`${p}/`)))).toEqual([]);
  });

  it('the runtime image holds every task runtime: sh and node from the base image, python3 installed', () => {
    const installed = instructions(finalStage, 'RUN').flatMap(aptPackages);
    for (const [command, source] of Object.entries(TASK_RUNTIMES))
      if (source !== 'base image')
        expect({ command, installed: installed.includes(source.package) }).toEqual({
          command,
          installed: true,
        });
    expect(finalStage.from).toMatch(/^node:\d+-\w+-slim$/); // the base TASK_RUNTIMES describes
  });

  it('has PostgreSQL, one one-shot job, two control-plane replicas and two workers; every service but the job has a healthcheck and a restart policy', () => {
    expect(compose.services.postgres?.image).toMatch(/^postgres:\d+$/); // the official image
    expect(compose.services.postgres?.healthcheck?.test.join(' ')).toMatch(/pg_isready/);
    expect(jobs).toEqual(['setup']);
    expect(controlPlanes).toHaveLength(2);
    expect(workers).toHaveLength(2);
    expect(Object.keys(compose.services).sort()).toEqual(
      ['postgres', ...jobs, ...controlPlanes, ...workers].sort(),
    );
    for (const [name, s] of services.filter(([name]) => !jobs.includes(name))) {
      expect({ name, test: s.healthcheck?.test?.[0] }).toEqual({ name, test: expect.stringMatching(/^CMD/) });
      expect({ name, restart: s.restart }).toEqual({
        name,
        restart: expect.stringMatching(/^(unless-stopped|on-failure|always)/),
      });
    }
    for (const name of [...jobs, ...controlPlanes, ...workers]) {
      expect({ name, build: compose.services[name]!.build }).toEqual({ name, build: '.' });
      expect(compose.services[name]!.image).toBe(compose.services.setup!.image);
    }
  });

  it('control-plane replicas: cluster profile on the job’s database, reachable from other containers, started after the job and a healthy PostgreSQL, always restarted', () => {
    const pg = env('postgres');
    const url = new URL(env('setup').QL_DATABASE_URL!);
    expect({
      host: url.hostname,
      port: url.port,
      db: url.pathname,
      user: url.username,
      password: url.password,
    }).toEqual({
      host: 'postgres',
      port: '5432',
      db: `/${pg.POSTGRES_DB}`,
      user: pg.POSTGRES_USER,
      password: pg.POSTGRES_PASSWORD,
    });
    for (const name of controlPlanes) {
      const s = compose.services[name]!;
      const e = env(name);
      expect(Object.keys(e).filter((k) => !SETTINGS.some((setting) => setting.env === k))).toEqual([]);
      const config = loadConfig(e); // what the process will read: an unknown or bad value throws
      expect(config).toMatchObject({
        profile: 'cluster-control',
        adminHost: '0.0.0.0',
        ingressHost: '0.0.0.0',
      });
      expect(e.QL_DATABASE_URL).toBe(env('setup').QL_DATABASE_URL);
      expect(s.depends_on).toEqual({
        setup: { condition: 'service_completed_successfully' },
        postgres: { condition: 'service_healthy' },
      });
      expect(s.restart).toBe('unless-stopped');
      expect(durationMs(s.stop_grace_period ?? '10s')).toBeGreaterThan(config.shutdownGraceMs);
      // Published: the admin API (plain HTTP) on loopback only, the mTLS ingress on every interface.
      expect(s.ports?.map((p) => p.split(':').slice(-1)[0]).sort()).toEqual(
        [String(config.adminPort), String(config.ingressPort)].sort(),
      );
      expect(s.ports?.find((p) => p.endsWith(`:${config.adminPort}`))).toMatch(/^127\.0\.0\.1:/);
    }
  });

  it('workers join by enrollment: the token file and CA the job writes, read-only; their own key and certificate in their own volume; no key of the PKI; a replica’s ingress named on the server certificate; restarted on failure', () => {
    // The job makes no worker certificate, and one token for every worker id (a pattern and a count).
    expect(jobScript).toMatch(/ pki --no-workers /);
    expect(optionValues('worker')).toEqual([]);
    const [pattern] = optionValues('pattern');
    expect(Number(optionValues('count')[0])).toBeGreaterThanOrEqual(workers.length);
    const [tokenOut] = optionValues('out').map(expand);
    const dir = mkdtempSync(join(tmpdir(), 'ql-compose-token-'));
    const tokenFile = join(dir, 'worker.token');
    writeFileSync(tokenFile, `qlet_${'A'.repeat(43)}\n`, { mode: 0o600 });
    const states = new Set<string>();
    try {
      for (const name of workers) {
        const s = compose.services[name]!;
        const e = env(name);
        const known = [...WORKER_SETTINGS.map((setting) => setting.env), 'QL_PROFILE'];
        expect(Object.keys(e).filter((k) => !known.includes(k))).toEqual([]);
        // The token as a file the job writes (never in the environment), the CA beside it: read-only.
        expect(e.QL_WORKER_ENROLL_TOKEN).toBeUndefined();
        expect(e.QL_WORKER_ENROLL_TOKEN_FILE).toBe(tokenOut);
        const join_ = [...mountedVolumes(jobs[0]!)].find((v) =>
          tokenOut!.startsWith(`${mountOf(jobs[0]!, v)!.target}/`),
        )!;
        expect(mountOf(name, join_)).toEqual({ target: mountOf(jobs[0]!, join_)!.target, readOnly: true });
        expect(jobScript).toContain(`"$QL_DEV_PKI_DIR/ca.crt" "$JOIN_DIR/ca.crt"`);
        expect(e.QL_WORKER_TLS_CA).toBe(`${expand('$JOIN_DIR')}/ca.crt`);
        // No key of the PKI within reach: the PKI volume is the job's and the control planes' only.
        expect(mountedVolumes(name)).not.toContain('pki');
        const config = loadWorkerConfig({ ...e, QL_WORKER_ENROLL_TOKEN_FILE: tokenFile });
        expect(config.workerId).toMatch(new RegExp(`^${pattern!.replace('*', '.+')}$`));
        // Its key and certificate in its own writable volume, kept across restarts: no token needed then.
        const state = mountedVolumes(name).find((v) =>
          config.tlsKeyPath.startsWith(`${mountOf(name, v)!.target}/`),
        );
        expect({ name, state: state && mountOf(name, state)!.readOnly }).toEqual({ name, state: false });
        expect(config.tlsCertPath.startsWith(`${mountOf(name, state!)!.target}/`)).toBe(true);
        expect(services.filter(([other]) => mountedVolumes(other).includes(state!)).map(([n]) => n)).toEqual([
          name,
        ]);
        states.add(state!);
        // Every replica, its own first (R-WRK-7): one replica down does not fence it.
        const targets = config.controlPlaneOrigins.map(ingressTarget);
        expect(targets.map((t) => t.service).sort()).toEqual([...controlPlanes].sort());
        for (const target of targets) {
          expect(target.port).toBe(env(target.service).QL_INGRESS_PORT);
          expect(optionValues('server-name')).toContain(target.service);
        }
        expect(s.depends_on).toEqual({ [targets[0]!.service]: { condition: 'service_healthy' } });
        expect(s.restart).toBe('on-failure'); // a fenced worker exits non-zero and must come back
        expect(durationMs(s.stop_grace_period ?? '10s')).toBeGreaterThan(config.stopBudgetMs);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    expect(states.size).toBe(workers.length);
    // The replicas sign the workers' certificates with the job's worker issuer.
    for (const name of controlPlanes)
      expect(loadConfig(env(name))).toMatchObject({
        workerIssuerCertPath: `${env(jobs[0]!).QL_DEV_PKI_DIR}/worker-issuer.crt`,
        workerIssuerKeyPath: `${env(jobs[0]!).QL_DEV_PKI_DIR}/worker-issuer.key`,
      });
  });
});

interface Address {
  admin: string;
  ingress: string;
}

function getJson(
  url: string,
  token?: string,
  post?: { body?: unknown; headers?: Record<string, string> },
): Promise<{ status: number; body: unknown }> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = token ? { authorization: `Bearer ${token}` } : {};
    if (post?.body !== undefined) headers['content-type'] = 'application/json';
    const method = post ? 'POST' : 'GET';
    const req = request(url, { method, headers: { ...headers, ...post?.headers }, agent: false }, (res) => {
      let raw = '';
      res.on('data', (chunk: Buffer) => (raw += chunk.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: raw ? JSON.parse(raw) : undefined }));
    });
    req.on('error', reject);
    req.end(post?.body === undefined ? undefined : JSON.stringify(post.body));
  });
}

describe('the compose services as real processes (compiled image layout, PostgreSQL)', () => {
  let image: ReplayedImage;
  let db: TestPostgresDatabase;
  let volumes: string;
  const addresses = new Map<string, Address>();
  const processes: LoggedProcess[] = [];

  beforeAll(async () => {
    [image, db] = await Promise.all([replayImage(stages), createPostgresDatabase()]);
    volumes = mkdtempSync(join(tmpdir(), 'ql-compose-volumes-'));
    // As a volume's mount point under /var/lib: the workers' task user (QL_WORKER_RUN_AS) may pass
    // through to its run folders; a worker refuses to start otherwise.
    chmodSync(volumes, 0o711);
    // Docker makes a named volume's folder before a container mounts it (root's, 0755 when new).
    for (const volume of Object.keys(compose.volumes ?? {}))
      mkdirSync(join(volumes, volume), { mode: 0o755 });
  }, IMAGE_MS);

  afterAll(async () => {
    for (const p of processes.filter((p) => p.running)) {
      p.kill('SIGKILL');
      await p.exited;
    }
    await db?.drop();
    image?.remove();
    if (volumes) rmSync(volumes, { recursive: true, force: true });
  });

  /** The service's environment with this machine standing in for the containers (see the header). */
  function localEnv(name: string): Record<string, string> {
    const s = compose.services[name]!;
    const result: Record<string, string> = {};
    for (const [key, composeValue] of Object.entries(s.environment ?? {})) {
      let value = composeValue;
      for (const mount of s.volumes ?? []) {
        const [volume, target] = mount.split(':') as [string, string];
        if (volume in (compose.volumes ?? {}) && (value === target || value.startsWith(`${target}/`))) {
          value = join(volumes, volume) + value.slice(target.length);
        }
      }
      if (key === 'QL_DATABASE_URL') {
        const url = new URL(value);
        const local = new URL(db.url);
        expect(url.hostname).toBe('postgres');
        for (const part of ['hostname', 'port', 'pathname', 'username', 'password'] as const)
          url[part] = local[part];
        value = url.toString();
      }
      if (/^QL_(ADMIN|INGRESS)_HOST$/.test(key)) value = '127.0.0.1';
      if (/^QL_(ADMIN|INGRESS)_PORT$/.test(key)) value = '0';
      if (key === 'QL_WORKER_CONTROL_PLANE_URL') {
        const origins = value.split(',').map((origin) => {
          const target = ingressTarget(origin);
          expect(target.port).toBe(env(target.service).QL_INGRESS_PORT);
          return addresses.get(target.service)!.ingress;
        });
        value = origins.join(',');
      }
      result[key] = value;
    }
    return result;
  }

  /** A service's command in the image's WORKDIR: `node …`, or a worker's launcher (the image's copy). */
  function start(name: string): LoggedProcess {
    const [command, ...args] =
      compose.services[name]!.command ?? execForm(instructions(finalStage, 'CMD').pop()!);
    expect(['node', LAUNCHER]).toContain(command);
    const p = new LoggedProcess(command === 'node' ? process.execPath : join(image.root, command!), args, {
      cwd: image.root,
      env: { ...localEnv(name), PATH: image.path },
    });
    processes.push(p);
    return p;
  }

  /** The service's healthcheck command, with the ports the container's environment would hold. */
  async function healthy(name: string): Promise<true | undefined> {
    const [kind, command, ...args] = compose.services[name]!.healthcheck!.test;
    expect([kind, command]).toEqual(['CMD', 'node']);
    const address = addresses.get(name);
    const ports = address && {
      QL_ADMIN_PORT: new URL(address.admin).port,
      QL_INGRESS_PORT: new URL(address.ingress).port,
    };
    const result = await run(process.execPath, args, {
      cwd: image.root,
      env: { ...localEnv(name), ...ports },
    });
    return result.code === 0 ? true : undefined;
  }

  it('runs the job, then both replicas until /readyz, then both workers until both are registered; SIGTERM stops them cleanly', async () => {
    const [job] = jobs;
    const [sh, ...shArgs] = compose.services[job!]!.command!;
    const setup = await run(sh!, shArgs, { cwd: image.root, env: localEnv(job!) });
    // The job's only stderr lines name the database it migrates and makes the token in (ADR 0034).
    expect({ code: setup.code, stderr: setup.stderr }).toEqual({
      code: 0,
      stderr: expect.stringMatching(/^(database: postgres:\/\/\S+ \(QL_DATABASE_URL\)\n){2}$/),
    });
    expect(setup.stdout).toContain('migrations applied (postgres)');
    // No worker key or certificate from the PKI step; the token alone in a 0600 file, the CA beside it,
    // in a folder only its owner (root: the workers' user) may enter.
    expect(readdirSync(join(volumes, 'pki', 'workers'))).toEqual([]);
    const joinDir = join(volumes, 'worker-join');
    expect(statSync(joinDir).mode & 0o777).toBe(0o700);
    expect(readdirSync(joinDir).sort()).toEqual(['ca.crt', 'worker.token']);
    expect(statSync(join(joinDir, 'worker.token')).mode & 0o777).toBe(0o600);
    const joinToken = readFileSync(join(joinDir, 'worker.token'), 'utf8');
    expect(joinToken).toMatch(/^qlet_[A-Za-z0-9_-]{43}\n$/);
    expect(setup.stdout).not.toContain(joinToken.trim());
    expect(readFileSync(join(joinDir, 'ca.crt'))).toEqual(readFileSync(join(volumes, 'pki', 'ca.crt')));
    const server = new X509Certificate(readFileSync(join(volumes, 'pki', 'server.crt')));
    for (const name of controlPlanes) expect(server.checkHost(name, { wildcards: false })).toBe(name);

    const replicas = controlPlanes.map((name) => ({ name, p: start(name) }));
    for (const { name, p } of replicas) {
      const ready = await p.until(
        `${name} ready`,
        async () => p.lines.find((l) => l.msg === 'control plane ready'),
        { deadlineMs: START_MS },
      );
      addresses.set(name, { admin: String(ready.admin), ingress: String(ready.ingress) });
    }
    for (const { name, p } of replicas) {
      await p.until(`${name} healthcheck`, () => healthy(name), { pollMs: 250, deadlineMs: SETTLE_MS });
      expect((await getJson(`${addresses.get(name)!.admin}/readyz`)).status).toBe(200);
    }

    const key = await run(
      process.execPath,
      ['dist/apps/control-plane/src/cli.js', 'api-key', '--name', 'compose-e2e', '--role', 'admin'],
      { cwd: image.root, env: localEnv(controlPlanes[0]!) },
    );
    expect(key.code).toBe(0);
    const { token } = JSON.parse(key.stdout) as { token: string };

    const running = workers.map((name) => ({ name, p: start(name) }));
    const statuses = async () => {
      const lists = await Promise.all(
        controlPlanes.map((name) => getJson(`${addresses.get(name)!.admin}/api/v1/workers`, token)),
      );
      return lists.map(({ body }) =>
        Object.fromEntries(
          (body as { items: { workerId: string; status: string }[] }).items.map((w) => [
            w.workerId,
            w.status,
          ]),
        ),
      );
    };
    const online = Object.fromEntries(workers.map((name) => [env(name).QL_WORKER_ID, 'online']));
    for (const { name, p } of running) {
      await p.until(`${name} registered`, async () => p.lines.find((l) => l.msg === 'worker registered'), {
        deadlineMs: START_MS,
      });
      // Started by the launcher (ADR 0046), which said which class it chose and execed node in its place.
      expect(p.lines.find((l) => l.msg === 'worker machine class')).toMatchObject({
        workerId: env(name).QL_WORKER_ID,
        machineClass: expect.stringMatching(/^(small|large)$/),
      });
      await p.until(`${name} healthcheck`, () => healthy(name), { pollMs: 250, deadlineMs: SETTLE_MS });
    }
    // Each joined by enrollment: its own 0600 key, a certificate the replicas' worker issuer signed for
    // its id, as short-lived as the replicas issue them, recorded by the control plane; the token never
    // in its log.
    const issuer = new X509Certificate(readFileSync(join(volumes, 'pki', 'worker-issuer.crt')));
    const ttlMs = loadConfig(env(controlPlanes[0]!)).workerCertTtlMs;
    for (const { name, p } of running) {
      const files = localEnv(name);
      expect(p.messages()).toEqual(
        expect.arrayContaining(['worker enrolling with its token', 'worker certificate enrolled']),
      );
      expect(p.transcript()).not.toContain(joinToken.trim());
      expect(statSync(files.QL_WORKER_TLS_KEY!).mode & 0o777).toBe(0o600);
      const cert = new X509Certificate(readFileSync(files.QL_WORKER_TLS_CERT!));
      expect(cert.checkIssued(issuer) && cert.verify(issuer.publicKey)).toBe(true);
      expect(cert.subjectAltName).toBe(
        `URI:spiffe://${env(controlPlanes[0]!).QL_TRUST_DOMAIN}/worker/${env(name).QL_WORKER_ID}`,
      );
      // Valid from a little before it was signed (clock skew) until QL_WORKER_CERT_TTL_MS after.
      expect(Date.parse(cert.validTo) - Date.now()).toBeLessThanOrEqual(ttlMs);
      const view = await getJson(
        `${addresses.get(controlPlanes[0]!)!.admin}/api/v1/workers/${env(name).QL_WORKER_ID}`,
        token,
      );
      expect((view.body as { certificateFingerprint: string }).certificateFingerprint).toBe(
        cert.fingerprint256.replaceAll(':', '').toLowerCase(),
      );
    }
    // Each worker registered with its own replica (its first origin); both replicas see both (one database).
    await running[0]!.p.until(
      'both workers online on both replicas',
      async () =>
        (await statuses()).every((s) => JSON.stringify(s) === JSON.stringify(online)) ? true : undefined,
      { pollMs: 250, deadlineMs: SETTLE_MS },
    );

    // A Python task runs on one of the workers, through the image's runtimes.
    const admin = addresses.get(controlPlanes[0]!)!.admin;
    const task = await getJson(`${admin}/api/v1/tasks`, token, {
      body: {
        name: 'compose-python',
        runtime: 'python',
        command: 'import sys\nprint("py", sys.version_info[0])',
      },
    });
    expect(task.status).toBe(201);
    const trigger = await getJson(`${admin}/api/v1/tasks/${(task.body as { id: string }).id}/runs`, token, {
      headers: { 'idempotency-key': 'compose-python-1' },
    });
    expect(trigger.status).toBe(201);
    const runId = (trigger.body as { run: { id: string } }).run.id;
    const ended = await running[0]!.p.until(
      'the Python run ended',
      async () => {
        const { body } = await getJson(`${admin}/api/v1/runs/${runId}`, token);
        const run = body as { status: string; attempts: { exitCode: number | null }[] };
        return ['succeeded', 'failed', 'cancelled', 'timed_out', 'lost'].includes(run.status)
          ? run
          : undefined;
      },
      { deadlineMs: START_MS, pollMs: 250 },
    );
    expect({ status: ended.status, exitCode: ended.attempts[0]?.exitCode }).toEqual({
      status: 'succeeded',
      exitCode: 0,
    });
    const logs = await getJson(`${admin}/api/v1/runs/${runId}/logs`, token);
    const output = (logs.body as { items: { stream: string; text: string }[] }).items;
    expect(output.map(({ stream, text }) => ({ stream, text }))).toEqual([
      { stream: 'stdout', text: 'py 3\n' },
    ]);

    for (const { p } of running) p.kill('SIGTERM');
    for (const { name, p } of running) {
      expect({ name, exit: await p.exited, stderr: p.stderr }).toEqual({
        name,
        exit: { code: WORKER_EXIT.ok, signal: null },
        stderr: [],
      });
    }
    const offline = Object.fromEntries(workers.map((name) => [env(name).QL_WORKER_ID, 'offline']));
    expect(await statuses()).toEqual(controlPlanes.map(() => offline));

    for (const { p } of replicas) p.kill('SIGTERM');
    for (const { name, p } of replicas) {
      expect({ name, exit: await p.exited }).toEqual({ name, exit: { code: 0, signal: null } });
    }
  }, 930_000); // every wait at its deadline (4 × START_MS, 5 × SETTLE_MS), and two minutes for the rest
});
