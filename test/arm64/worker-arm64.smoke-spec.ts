/**
 * The worker on arm64 (issue 30 item 6, ADR 0059): the worker's bundle on the registry's arm64 Node 24,
 * run under qemu-user-static (binfmt, so the node tasks it spawns are arm64 too), against a control
 * plane on the host. It enrolls with a token, registers as arm64, runs a shell and a node task, loses
 * its connection during a run and recovers, and fetches and runs a bundle. Its better-sqlite3 is an
 * x64 build, which cannot load there: the journal's kernel lock is taken through node:sqlite.
 *
 * Not part of `npm test`: `npm run smoke:arm64` (scripts/smoke-arm64.sh) installs qemu and the arm64
 * Node, builds the bundle and runs this file; .ci/run runs it.
 */
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pushBundle } from '../support/bundle-fixtures';
import { issuerEnv, newEnrollmentToken, workerMachine } from '../support/enrolled-worker';
import { RemoteRunHarness, RunWorker, eventually } from '../support/remote-run-harness';
import { TcpFaultProxy } from '../support/tcp-fault-proxy';

// Emulated: a start takes ~10 s, a node task several seconds.
jest.setTimeout(300_000);
const EMULATED_DEADLINE_MS = 150_000;

const ARM64_NODE = process.env.QL_ARM64_NODE;
const LD_PREFIX = process.env.QL_ARM64_LD_PREFIX ?? '/usr/aarch64-linux-gnu';

describe('the worker on arm64 (emulated), against a control plane on the host', () => {
  let h: RemoteRunHarness;
  let proxy: TcpFaultProxy;
  let w: RunWorker;

  beforeAll(async () => {
    if (!ARM64_NODE || process.env.QL_TEST_WORKER_ENTRY !== 'bundle')
      throw new Error('run through `npm run smoke:arm64` (QL_ARM64_NODE and the built bundle)');
    h = await RemoteRunHarness.start('sqlite', [], (pki) => ({
      ...issuerEnv(pki),
      QL_WORKER_CERT_TTL_MS: '300000',
      // Emulation is ~10x slower than the host: terms with room for its calls.
      QL_SESSION_LEASE_MS: '30000',
      QL_RUN_LEASE_MS: '30000',
    }));
    proxy = await TcpFaultProxy.start(h.t.plane.ingressUrl);
    // The harness runs `<node> <bundle>`: this launcher swaps its node for the arm64 one.
    const launcher = h.folder('arm64-node');
    writeFileSync(launcher, `#!/bin/sh\nshift\nexec ${JSON.stringify(ARM64_NODE)} "$@"\n`, { mode: 0o755 });
    const m = workerMachine(h, '路由器');
    w = h.startWorker('router-arm64', {
      journalDir: m.journal,
      workDir: m.runs,
      launcher: [launcher],
      env: {
        QL_WORKER_TLS_CERT: m.cert,
        QL_WORKER_TLS_KEY: m.key,
        QL_WORKER_ENROLL_TOKEN: await newEnrollmentToken(h.t, 'router-arm64'),
        QL_WORKER_CONTROL_PLANE_URL: proxy.url,
        QL_WORKER_REQUEST_TIMEOUT_MS: '9000',
        QL_WORKER_HEARTBEAT_MS: '2000',
        QEMU_LD_PREFIX: LD_PREFIX,
      },
    });
  });
  afterAll(async () => {
    await proxy?.close();
    await h?.close();
  });

  /** Runs a task to its end. Its processes get QEMU_LD_PREFIX too (only emulation needs it). */
  const runTask = async (spec: Record<string, unknown>) => {
    const runId = await h.trigger(await h.createTask({ ...spec, env: { QEMU_LD_PREFIX: LD_PREFIX } }));
    const run = await h.untilRunEnds(runId, EMULATED_DEADLINE_MS);
    return { runId, status: run.status, output: await h.output(runId) };
  };

  it('enrolls and registers as arm64 on Node 24', async () => {
    await w.until(
      'router-arm64 online',
      async () => (await h.worker('router-arm64'))?.status === 'online' || undefined,
      {
        deadlineMs: EMULATED_DEADLINE_MS,
      },
    );
    const detail = (await h.t.admin('GET', '/api/v1/workers/router-arm64')).body as {
      capabilities: { architecture: string; runtimes: { name: string; version: string }[] };
    };
    expect(detail.capabilities.architecture).toBe('arm64');
    expect(detail.capabilities.runtimes).toContainEqual({
      name: 'node',
      version: expect.stringMatching(/^v?24\./),
    });
  });

  it('runs a shell task and a node task (the node task on arm64 too)', async () => {
    expect(await runTask({ runtime: 'shell', command: 'echo "签到 $(uname -m)"' })).toMatchObject({
      status: 'succeeded',
      output: '签到 x86_64\n', // a shell task is the host's /bin/sh: only node is emulated
    });
    expect(await runTask({ runtime: 'node', command: "console.log('京东', process.arch)" })).toMatchObject({
      status: 'succeeded',
      output: '京东 arm64\n',
    });
  });

  it('loses its connection during a run and recovers: the run succeeds, once', async () => {
    const markers = h.folder('markers');
    mkdirSync(markers, { recursive: true });
    const started = join(markers, 'started');
    const release = join(markers, 'release');
    const runId = await h.trigger(
      await h.createTask({
        runtime: 'shell',
        command: `echo x >> ${started}; while [ ! -f ${release} ]; do sleep 0.2; done; echo 完成`,
      }),
    );
    await eventually('the run started', () => (existsSync(started) ? true : undefined), {
      deadlineMs: EMULATED_DEADLINE_MS,
    });
    try {
      expect(proxy.cut()).toBeGreaterThan(0);
      const afterCut = w.lines.length;
      // A renewal after the cut is answered (on a new connection): the lease goes on.
      await w.until(
        'a lease renewal answered after the cut',
        async () => w.lines.slice(afterCut).find((l) => l.msg === 'lease renewed'),
        { deadlineMs: EMULATED_DEADLINE_MS },
      );
    } finally {
      writeFileSync(release, '');
    }
    const run = await h.untilRunEnds(runId, EMULATED_DEADLINE_MS);
    expect({ status: run.status, attempts: run.attempts.length }).toEqual({
      status: 'succeeded',
      attempts: 1,
    });
    expect(await h.output(runId)).toBe('完成\n');
  });

  it('fetches a bundle and runs its node script', async () => {
    const digest = await pushBundle(h.t, { 'jobs/lib/greet.js': "exports.greet = (w) => '你好，' + w;\n" });
    expect(
      await runTask({
        runtime: 'node',
        command: "console.log(require('./lib/greet.js').greet('路由器'), process.arch)",
        bundle: { digest, workdir: 'jobs' },
      }),
    ).toMatchObject({ status: 'succeeded', output: '你好，路由器 arm64\n' });
  });
});
