/**
 * ADR 0046: bin/ql-worker picks the worker's machine class and execs node with that class's V8 flags.
 * Each case runs the real launcher (sh) on a fake host — its /proc/self/cgroup, cgroup limit files and
 * /proc/meminfo under a temp folder — with a fixture entry in place of the worker's main, which prints
 * the flags node received. The flag lists of the sh are held equal to workerNodeFlags() here.
 */
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MACHINE_CLASSES, workerNodeFlags } from '../../apps/worker/src/node-flags';
import { loadWorkerConfig } from '../../apps/worker/src/config/worker-config';
import { WORKER_EXIT } from '@ql/contracts';
import {
  FakeHost,
  LAUNCHER_PATH,
  LauncherRun,
  gib,
  mib,
  removeFixtureEntry,
  runLauncher,
} from '../support/worker-launcher';
import { NODE_MATRIX, otherNode } from '../support/other-node';

const SERVICE = '/system.slice/system-qinglong\\x2dworker.slice/qinglong-worker@router-7.service';
const v2 = (path: string) => `sys/fs/cgroup${path}/memory.max`;
const v1 = (path: string) => `sys/fs/cgroup/memory${path}/memory.limit_in_bytes`;
/** cgroup v1's "no limit" on x86-64 (LONG_MAX rounded down to the page size). */
const V1_UNLIMITED = '9223372036854771712';

const hosts: FakeHost[] = [];
const host = () => {
  const h = new FakeHost();
  hosts.push(h);
  return h;
};
afterAll(() => {
  for (const h of hosts) h.remove();
  removeFixtureEntry();
});

/** The launcher started node in its own place with `flags`, and said why in one line. */
function expectClass(run: LauncherRun, machineClass: string, why: Record<string, unknown>): void {
  expect({ code: run.code, stderr: run.stderr }).toEqual({ code: 0, stderr: '' });
  expect(run.saw?.execArgv).toEqual([...workerNodeFlags(machineClass as 'small' | 'large')]);
  expect(run.saw?.pid).toBe(run.pid); // exec: the same process, no sh left above node
  expect(run.classLine).toEqual({
    time: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/),
    level: 'info',
    msg: 'worker machine class',
    workerId: 'worker-1',
    machineClass,
    smallMaxBytes: gib(1),
    nodeFlags: [...workerNodeFlags(machineClass as 'small' | 'large')],
    ...why,
  });
}

describe('bin/ql-worker: the machine class from the memory the worker may use (ADR 0046)', () => {
  it('is an executable POSIX sh script', () => {
    expect(statSync(LAUNCHER_PATH).mode & 0o111).toBe(0o111);
  });

  // The unit's own cgroup v2 limit (`max`: none) beside the machine's MemTotal: the least decides.
  it.each([
    ['a 256 MiB cgroup v2 limit on an 8 GiB machine: small', mib(256), gib(8), 'small', 'cgroup'],
    ['an 8 GiB cgroup v2 limit on a 16 GiB machine: large', gib(8), gib(16), 'large', 'cgroup'],
    ['exactly 1 GiB of cgroup v2 limit on a 4 GiB machine: still small', gib(1), gib(4), 'small', 'cgroup'],
    [
      'no cgroup limit ("max") on a 512 MiB router: small, from MemTotal',
      'max',
      mib(512),
      'small',
      'MemTotal',
    ],
    ['no cgroup limit on a 4 GiB machine: large', 'max', gib(4), 'large', 'MemTotal'],
  ] as const)('%s', async (_name, limit, memTotal, machineClass, from) => {
    const h = host().cgroup(`0::${SERVICE}`).file(v2(SERVICE), `${limit}\n`).memTotal(memTotal);
    expectClass(
      await runLauncher(h),
      machineClass,
      from === 'cgroup'
        ? { source: 'cgroup v2 memory.max', file: `${h.root}/${v2(SERVICE)}`, limitBytes: limit }
        : { source: 'MemTotal', file: `${h.root}/proc/meminfo`, limitBytes: memTotal },
    );
  });

  it('a limit on a cgroup above its own counts too (a slice): the smallest wins', async () => {
    const slice = '/system.slice/system-qinglong\\x2dworker.slice';
    const h = host()
      .cgroup(`0::${SERVICE}`)
      .file(v2(SERVICE), `${gib(2)}\n`)
      .file(v2(slice), `${mib(768)}\n`)
      .file(v2('/system.slice'), 'max\n')
      .memTotal(gib(16));
    expectClass(await runLauncher(h), 'small', {
      source: 'cgroup v2 memory.max',
      file: `${h.root}/${v2(slice)}`,
      limitBytes: mib(768),
    });
  });

  it('a container without its own cgroup namespace: its cgroup path is not under the mount, the mount root is its cgroup', async () => {
    const h = host()
      .cgroup('0::/system.slice/docker-0123abcd.scope')
      .file('sys/fs/cgroup/memory.max', `${mib(256)}\n`)
      .memTotal(gib(32));
    expectClass(await runLauncher(h), 'small', {
      source: 'cgroup v2 memory.max',
      file: `${h.root}/sys/fs/cgroup/memory.max`,
      limitBytes: mib(256),
    });
  });

  it('cgroup v1: memory.limit_in_bytes of the memory hierarchy; its "no limit" is none', async () => {
    const limited = host()
      .cgroup('12:pids:/docker/abc', '4:memory:/docker/abc', '1:name=systemd:/docker/abc', '0::/')
      .file(v1('/docker/abc'), `${mib(256)}\n`)
      .file(v1(''), `${V1_UNLIMITED}\n`)
      .memTotal(gib(8));
    expectClass(await runLauncher(limited), 'small', {
      source: 'cgroup v1 memory.limit_in_bytes',
      file: `${limited.root}/${v1('/docker/abc')}`,
      limitBytes: mib(256),
    });
    const unlimited = host()
      .cgroup('5:cpu,memory:/user.slice')
      .file(v1('/user.slice'), `${V1_UNLIMITED}\n`)
      .memTotal(gib(8));
    expectClass(await runLauncher(unlimited), 'large', {
      source: 'MemTotal',
      file: `${unlimited.root}/proc/meminfo`,
      limitBytes: gib(8),
    });
    // …even with nothing else to go by: it is not a limit of 8 EiB.
    const alone = host().cgroup('4:memory:/').file(v1(''), `${V1_UNLIMITED}\n`);
    expectClass(await runLauncher(alone), 'small', {
      source: 'no memory limit readable',
      file: null,
      limitBytes: null,
    });
  });

  it('nothing readable (no /proc): small, the choice that fits every machine', async () => {
    expectClass(await runLauncher(host()), 'small', {
      source: 'no memory limit readable',
      file: null,
      limitBytes: null,
    });
  });

  it('an explicit QL_WORKER_MACHINE_CLASS wins over the limits, which the line still shows', async () => {
    const router = host()
      .cgroup(`0::${SERVICE}`)
      .file(v2(SERVICE), `${mib(256)}\n`)
      .memTotal(gib(8));
    expectClass(await runLauncher(router, { QL_WORKER_MACHINE_CLASS: 'large' }), 'large', {
      source: 'QL_WORKER_MACHINE_CLASS',
      file: `${router.root}/${v2(SERVICE)}`,
      limitBytes: mib(256),
    });
    const server = host().memTotal(gib(64));
    expectClass(await runLauncher(server, { QL_WORKER_MACHINE_CLASS: 'small' }), 'small', {
      source: 'QL_WORKER_MACHINE_CLASS',
      file: `${server.root}/proc/meminfo`,
      limitBytes: gib(64),
    });
  });

  it('every class of node-flags.ts gives node exactly workerNodeFlags(class): the sh holds the same lists', async () => {
    const h = host().memTotal(gib(8));
    for (const machineClass of MACHINE_CLASSES) {
      const run = await runLauncher(h, { QL_WORKER_MACHINE_CLASS: machineClass });
      expect({ machineClass, execArgv: run.saw?.execArgv }).toEqual({
        machineClass,
        execArgv: [...workerNodeFlags(machineClass)],
      });
    }
  });

  it('the real Node 24 gets the small class without --no-expose-wasm (it refuses it: exit 9); the real Node 22 gets it', async () => {
    // The matrix's Nodes (scripts/install-node.sh), whichever Node runs this test: the launcher asks
    // each for its version, and each really starts with the flags it was given.
    const node24 = otherNode(24);
    const node22 = otherNode(22);
    expect(spawnSync(node24, ['--no-expose-wasm', '-e', '0']).status).toBe(9);
    expect(spawnSync(node22, ['--no-expose-wasm', '-e', '0']).status).toBe(0);
    const h = host().memTotal(mib(256));
    for (const [node, version, expected] of [
      [node24, `v${NODE_MATRIX['24']}`, ['--lite-mode']],
      [node22, `v${NODE_MATRIX['22']}`, ['--lite-mode', '--no-expose-wasm']],
    ] as const) {
      const run = await runLauncher(h, { QL_WORKER_NODE: node });
      expect({
        version,
        code: run.code,
        execArgv: run.saw?.execArgv,
        nodeFlags: run.classLine?.nodeFlags,
      }).toEqual({
        version,
        code: 0,
        execArgv: expected,
        nodeFlags: expected,
      });
      expect(workerNodeFlags('small', version.slice(1))).toEqual(expected);
    }
    expect(workerNodeFlags('large', '24.22.3')).toEqual([]);
  });

  it('an invalid class: exit 2 (a configuration error, not restarted), one line on stderr naming the classes, node never started', async () => {
    const h = host().memTotal(gib(8));
    for (const value of ['huge', 'Small', '', 'small ']) {
      const run = await runLauncher(h, { QL_WORKER_MACHINE_CLASS: value });
      expect({ value, code: run.code, stdout: run.stdout, stderr: run.stderr }).toEqual({
        value,
        code: WORKER_EXIT.config,
        stdout: '',
        stderr: `worker configuration error: QL_WORKER_MACHINE_CLASS=${value} is not one of auto, small, large\n`,
      });
      // The worker refuses the same values with the same exit code, if started by other means.
      expect(() => loadWorkerConfig({ QL_WORKER_MACHINE_CLASS: value })).toThrow(
        `QL_WORKER_MACHINE_CLASS=${value} is not one of auto, ${MACHINE_CLASSES.join(', ')}`,
      );
    }
  });

  it('passes its arguments to the worker after the entry, keeps QL_WORKER_MACHINE_CLASS and drops its own variables; no class line then', async () => {
    const h = host().memTotal(gib(8));
    const run = await runLauncher(h, { QL_WORKER_MACHINE_CLASS: 'auto' }, ['journal', 'list', 'a b']);
    expect(run.code).toBe(0);
    expect(run.saw?.args).toEqual(['journal', 'list', 'a b']);
    expect(run.saw?.env).toEqual({
      QL_WORKER_MACHINE_CLASS: 'auto',
      QL_WORKER_NODE: null,
      QL_WORKER_ENTRY: null,
      QL_WORKER_PROC_ROOT: null,
    });
    expect(loadWorkerConfig({ QL_WORKER_MACHINE_CLASS: 'auto' }).machineClass).toBe('auto');
    // `--config-docs` and `journal …` print for a reader or a pipe: only the worker's own output.
    expect(run.classLine).toBeUndefined();
  });

  it('QL_WORKER_LOG_LEVEL=warn or error: no class line, as the worker logs no info line', async () => {
    const h = host().memTotal(gib(8));
    for (const level of ['warn', 'error']) {
      const run = await runLauncher(h, { QL_WORKER_LOG_LEVEL: level });
      expect({ level, line: run.classLine, execArgv: run.saw?.execArgv }).toEqual({
        level,
        line: undefined,
        execArgv: [...workerNodeFlags('large')],
      });
    }
  });

  it('QL_WORKER_ENTRY unset: starts the bundle beside its bin/ (ADR 0049); without one, exit 2 naming it and npm run build, node never started', () => {
    const tree = mkdtempSync(join(tmpdir(), 'ql-launcher-tree-'));
    try {
      mkdirSync(join(tree, 'bin'));
      copyFileSync(LAUNCHER_PATH, join(tree, 'bin', 'ql-worker'));
      const bundle = join(tree, 'dist', 'apps', 'worker', 'bundle', 'main.js');
      const mark = join(tree, 'ran');
      const start = () =>
        spawnSync(join(tree, 'bin', 'ql-worker'), ['journal', 'list'], {
          env: { PATH: process.env.PATH ?? '/usr/bin:/bin', QL_WORKER_NODE: process.execPath },
          encoding: 'utf8',
        });
      const missing = start();
      expect({ code: missing.status, stdout: missing.stdout, stderr: missing.stderr }).toEqual({
        code: WORKER_EXIT.config,
        stdout: '',
        stderr: `worker configuration error: ${join(tree, 'bin')}/../dist/apps/worker/bundle/main.js is missing: this dist/ was built without the worker's bundle; run npm run build\n`,
      });
      mkdirSync(join(tree, 'dist', 'apps', 'worker', 'bundle'), { recursive: true });
      writeFileSync(
        bundle,
        `require('node:fs').writeFileSync(${JSON.stringify(mark)}, process.argv.slice(2).join(' '));\n`,
      );
      const started = start();
      expect({ code: started.status, stderr: started.stderr }).toEqual({ code: 0, stderr: '' });
      expect(readFileSync(mark, 'utf8')).toBe('journal list');
    } finally {
      rmSync(tree, { recursive: true, force: true });
    }
  });

  it('a closed stdout (its reader gone) loses the line, never the start: node still runs (ADR 0034)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'ql-launcher-closed-'));
    try {
      const entry = join(dir, 'entry.js');
      const mark = join(dir, 'ran');
      writeFileSync(
        entry,
        `require('fs').writeFileSync(${JSON.stringify(mark)}, process.execArgv.join(' '));\n`,
      );
      // A pipe whose read end is closed before the launcher starts: its first write gets EPIPE.
      const python = `import os, subprocess, sys
r, w = os.pipe()
os.close(r)
sys.exit(subprocess.run([sys.argv[1]], stdout=w, env={"PATH": os.environ["PATH"], "QL_WORKER_NODE": sys.argv[2],
  "QL_WORKER_ENTRY": sys.argv[3], "QL_WORKER_MACHINE_CLASS": "small"}).returncode)`;
      const run = spawnSync('python3', ['-c', python, LAUNCHER_PATH, process.execPath, entry], {
        encoding: 'utf8',
        env: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
      });
      expect({ status: run.status, stderr: run.stderr }).toEqual({ status: 0, stderr: '' });
      expect(readFileSync(mark, 'utf8')).toBe(workerNodeFlags('small').join(' '));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a workerId with quotes and backslashes still makes one valid JSON line', async () => {
    const run = await runLauncher(host().memTotal(gib(8)), { QL_WORKER_ID: 'a"b\\c' });
    expect(run.classLine?.workerId).toBe('a"b\\c');
  });

  it("on this machine's real /proc and /sys: the class follows the limit it reports, and the limit is at most MemTotal", async () => {
    const run = await runLauncher(null);
    expect(run.code).toBe(0);
    const { machineClass, limitBytes } = run.classLine as { machineClass: string; limitBytes: number };
    expect(machineClass).toBe(limitBytes <= gib(1) ? 'small' : 'large');
    const memTotal = /^MemTotal:\s+(\d+) kB$/m.exec(readFileSync('/proc/meminfo', 'utf8'))![1]!;
    expect(limitBytes).toBeLessThanOrEqual(Number(memTotal) * 1024);
    expect(run.saw?.execArgv).toEqual([...workerNodeFlags(machineClass as 'small' | 'large')]);
  });
});
