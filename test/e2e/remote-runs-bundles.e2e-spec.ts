// Issue 19 items 2-3 (ADR 0051), end to end: a real control plane (real TLS, both dialects) and a real
// worker process. A bundle with a node and a python script runs on the remote worker from its working
// folder; the second run of the same revision downloads nothing (counted where the control plane
// serves the fetch); each run gets a fresh copy (issue 19: a spare made after the last run, that nothing
// a run did to its own reaches); past the cache cap the least recently used bundle goes.
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { SqlBundleRepository } from '@ql/persistence';
import { pushBundle } from '../support/bundle-fixtures';
import { RemoteRunHarness, RunWorker, eventually } from '../support/remote-run-harness';
import type { Dialect } from '../support/test-plane';

jest.setTimeout(180_000);

const NODE_SCRIPT = `
const fs = require('node:fs');
const { greeting } = require('./lib/greet.js');
// A fresh copy each run: a file the last run wrote must not be here.
const fresh = !fs.existsSync('scratch.txt');
fs.writeFileSync('scratch.txt', 'written by a run');
console.log(greeting('node') + (fresh ? ' (fresh copy)' : ' (STALE copy)'));
`;
const PY_SCRIPT = `
import os
print("hello from python in " + os.path.basename(os.getcwd()))
`;

describe.each<Dialect>(['sqlite', 'postgres'])('script bundles on a remote worker (%s)', (dialect) => {
  let h: RemoteRunHarness;
  let w: RunWorker;
  let cacheDir: string;
  const fetches = jest.spyOn(SqlBundleRepository.prototype, 'authorizeFetch');

  const push = (files: Record<string, string | Buffer>) => pushBundle(h.t, files);
  const runTask = async (taskId: string) => {
    const run = await h.untilRunEnds(await h.trigger(taskId));
    return { run, stdout: await h.output(run.id, 'stdout'), stderr: await h.output(run.id, 'stderr') };
  };

  beforeAll(async () => {
    h = await RemoteRunHarness.start(dialect, ['worker-a']);
    cacheDir = h.folder('bundle-cache');
    w = h.startWorker('worker-a', {
      env: { QL_WORKER_BUNDLE_CACHE_DIR: cacheDir, QL_WORKER_BUNDLE_CACHE_MB: '1' },
    });
    await h.untilOnline(w);
  });
  afterAll(async () => {
    await h?.close();
  });
  beforeEach(() => fetches.mockClear());

  it('runs a node and a python script from the bundle folder; the second run downloads nothing and gets a fresh copy', async () => {
    const digest = await push({
      'scripts/hello.js': NODE_SCRIPT,
      'scripts/lib/greet.js': 'exports.greeting = (who) => `hello from ${who}`;\n',
      'scripts/hello.py': PY_SCRIPT,
      'README.md': 'not in the working folder\n',
    });
    const taskId = await h.createTask({
      runtime: 'shell',
      command: 'node hello.js && python3 hello.py && test ! -e README.md',
      timeoutMs: 60_000,
      bundle: { digest, workdir: 'scripts' },
    });
    const first = await runTask(taskId);
    expect({ status: first.run.status, stderr: first.stderr }).toEqual({ status: 'succeeded', stderr: '' });
    expect(first.stdout).toBe('hello from node (fresh copy)\nhello from python in scripts\n');
    expect(fetches).toHaveBeenCalledTimes(1);
    expect(existsSync(join(cacheDir, digest))).toBe(true);
    // Nothing the run wrote reached the cache.
    expect(existsSync(join(cacheDir, digest, 'scripts', 'scratch.txt'))).toBe(false);

    const second = await runTask(taskId);
    expect(second.run.status).toBe('succeeded');
    expect(second.stdout).toBe('hello from node (fresh copy)\nhello from python in scripts\n');
    expect(fetches).toHaveBeenCalledTimes(1); // the cache served it: no request reached the control plane
    expect(w.lines.filter((l) => l.msg === 'bundle taken from the cache')).toHaveLength(1);
  });

  it('a node-runtime task runs its script from the bundle folder too', async () => {
    const digest = await push({ 'app/data.json': '{"n": 42}\n' });
    const taskId = await h.createTask({
      runtime: 'node',
      command: "console.log('n =', require(process.cwd() + '/data.json').n)",
      bundle: { digest, workdir: 'app' },
    });
    const { run, stdout } = await runTask(taskId);
    expect({ status: run.status, stdout }).toEqual({ status: 'succeeded', stdout: 'n = 42\n' });
  });

  it('a script that rewrites, deletes and chmods files in its working folder changes nothing the next attempt sees (the copy, then spares)', async () => {
    const digest = await push({ 'data.txt': 'original\n', 'gone.txt': 'here\n', 'run.sh': 'echo ok\n' });
    // Checks that its folder is pristine, then spoils it: a write in place after a chmod (what a hard
    // link shared with the cache would let through), a delete, a new file.
    const command = [
      'test "$(cat data.txt)" = original && test -f gone.txt && test ! -e extra.txt',
      'test "$(stat -c %a data.txt)" = 644 && echo pristine',
      'chmod 777 data.txt && echo poisoned > data.txt && rm gone.txt run.sh && echo x > extra.txt',
    ].join(' && ');
    const taskId = await h.createTask({ runtime: 'shell', command, bundle: { digest } });
    const spare = join(cacheDir, '.spare', digest);
    for (let n = 1; n <= 3; n++) {
      const { run, stdout, stderr } = await runTask(taskId);
      expect({ n, status: run.status, stdout, stderr }).toEqual({
        n,
        status: 'succeeded',
        stdout: 'pristine\n',
        stderr: '',
      });
      // The next attempt's copy is made once this one ended: it takes that spare (a rename).
      await eventually(`the spare copy after run ${n}`, () => existsSync(spare) || undefined);
    }
    expect(readFileSync(join(cacheDir, digest, 'data.txt'), 'utf8')).toBe('original\n');
    expect(readdirSync(join(cacheDir, digest)).sort()).toEqual(['data.txt', 'gone.txt', 'run.sh']);
    expect(fetches).toHaveBeenCalledTimes(1);
  });

  it('past QL_WORKER_BUNDLE_CACHE_MB the least recently used bundle goes, and is fetched again when needed', async () => {
    const big = (name: string) => ({ [`${name}.bin`]: randomBytes(700 * 1024), 'run.sh': 'echo ok\n' });
    const x = await push(big('x'));
    const y = await push(big('y'));
    const task = async (digest: string) =>
      h.createTask({ runtime: 'shell', command: 'sh run.sh', bundle: { digest } });
    const [tx, ty] = [await task(x), await task(y)];
    expect((await runTask(tx)).stdout).toBe('ok\n');
    expect(existsSync(join(cacheDir, x))).toBe(true);
    expect((await runTask(ty)).stdout).toBe('ok\n');
    // 700 KiB each, 1 MiB cap: x (not in use any more) went when y came.
    expect(existsSync(join(cacheDir, x))).toBe(false);
    expect(existsSync(join(cacheDir, y))).toBe(true);
    expect(fetches).toHaveBeenCalledTimes(2);
    expect((await runTask(tx)).stdout).toBe('ok\n');
    expect(fetches).toHaveBeenCalledTimes(3);
    expect(readdirSync(cacheDir).filter((n) => /^[0-9a-f]{64}$/.test(n))).toEqual([x]);
  });
});
