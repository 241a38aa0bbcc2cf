/**
 * scripts/native-cache.sh (ADR 0063): better-sqlite3 built once per Node ABI, kept outside the clone
 * under prebuild-install's own name, so `npm ci` (through prebuild-install's local prebuilds) and
 * scripts/with-node.sh take it instead of compiling SQLite again. Each case runs on a fresh cache
 * folder (`QL_NATIVE_CACHE`) with this checkout's own build, the one this Node loads; none compiles.
 */
import { execFile } from 'node:child_process';
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { REPO_ROOT } from '../support/docker-emulation';

const SCRIPT = join(REPO_ROOT, 'scripts', 'native-cache.sh');
const PACKAGE = join(REPO_ROOT, 'node_modules', 'better-sqlite3');
const VERSION: string = JSON.parse(readFileSync(join(PACKAGE, 'package.json'), 'utf8')).version;
/** prebuild-install's name for this Node's download (glibc Linux: no libc in the name). */
const NAME = `better-sqlite3-v${VERSION}-node-v${process.versions.modules}-${process.platform}-${process.arch}.tar.gz`;

interface Result {
  code: number;
  stdout: string;
  stderr: string;
}

async function run(
  file: string,
  args: string[],
  env: Record<string, string>,
  cwd = REPO_ROOT,
): Promise<Result> {
  try {
    const { stdout, stderr } = await promisify(execFile)(file, args, {
      cwd,
      // A compile would be a bug here (none of these cases needs one): stop it rather than wait minutes.
      timeout: 30_000,
      // This Node first: the script's `node` is the one the test runs on (the matrix runs it on each).
      env: { ...process.env, PATH: `${dirname(process.execPath)}:${process.env.PATH}`, ...env },
    });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

describe('scripts/native-cache.sh', () => {
  let dir: string;
  let cache: string;
  const cached = (...args: string[]) => run(SCRIPT, args, { QL_NATIVE_CACHE: cache });
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'ql-native-cache-'));
    cache = join(dir, 'cache');
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('dir: QL_NATIVE_CACHE, else ql-native under XDG_CACHE_HOME, else under ~/.cache', async () => {
    expect((await cached('dir')).stdout).toBe(`${cache}\n`);
    const xdg = await run(SCRIPT, ['dir'], { QL_NATIVE_CACHE: '', XDG_CACHE_HOME: join(dir, 'xdg') });
    expect(xdg.stdout).toBe(`${join(dir, 'xdg', 'ql-native')}\n`);
    const home = await run(SCRIPT, ['dir'], {
      QL_NATIVE_CACHE: '',
      XDG_CACHE_HOME: '',
      HOME: join(dir, 'home'),
    });
    expect(home.stdout).toBe(`${join(dir, 'home', '.cache', 'ql-native')}\n`);
  });

  it("store keeps this checkout's build under this Node's ABI once, and replaces a tarball that does not load", async () => {
    const first = await cached('store');
    expect(first).toMatchObject({ code: 0, stderr: `native-cache: stored ${join(cache, NAME)}\n` });
    expect(readdirSync(cache).filter((f) => !f.startsWith('.'))).toEqual([NAME]);

    const again = await cached('store');
    expect(again).toMatchObject({ code: 0, stderr: `native-cache: cached already: ${join(cache, NAME)}\n` });

    writeFileSync(join(cache, NAME), 'not a tarball');
    const replaced = await cached('store');
    expect(replaced).toMatchObject({ code: 0, stderr: `native-cache: stored ${join(cache, NAME)}\n` });
  });

  it('build answers from the cache without compiling when it holds a build this Node loads', async () => {
    await cached('store');
    // A Node folder as scripts/install-node.sh makes one: bin/node (this node) and include/node.
    const nodeDir = join(dir, 'node');
    mkdirSync(join(nodeDir, 'bin'), { recursive: true });
    mkdirSync(join(nodeDir, 'include', 'node'), { recursive: true });
    symlinkSync(process.execPath, join(nodeDir, 'bin', 'node'));
    const result = await cached('build', nodeDir);
    expect(result).toEqual({ code: 0, stdout: `${join(cache, NAME)}\n`, stderr: '' });

    const noHeaders = await cached('build', join(nodeDir, 'bin'));
    expect(noHeaders.code).toBe(1);
    expect(noHeaders.stderr).toContain('has no include/node (headers)');
  });

  it("rc points npm ci's prebuild-install at the cache: it takes the cached build by its name, offline", async () => {
    await cached('store');
    // A checkout with this one's scripts and lock, and better-sqlite3 as npm ci unpacks it (no build/).
    const checkout = join(dir, 'checkout');
    cpSync(join(REPO_ROOT, 'scripts'), join(checkout, 'scripts'), { recursive: true });
    cpSync(join(REPO_ROOT, 'package-lock.json'), join(checkout, 'package-lock.json'));
    const copy = join(checkout, 'node_modules', 'better-sqlite3');
    cpSync(PACKAGE, copy, { recursive: true, filter: (src) => !src.startsWith(join(PACKAGE, 'build')) });
    expect(existsSync(join(copy, 'build'))).toBe(false);
    const rc = await run(join(checkout, 'scripts', 'native-cache.sh'), ['rc'], { QL_NATIVE_CACHE: cache });
    expect(rc.code).toBe(0);
    expect(JSON.parse(readFileSync(join(checkout, '.prebuild-installrc'), 'utf8'))).toEqual({
      'local-prebuilds': cache,
    });
    // What npm ci runs: better-sqlite3's install script, in its folder; a download attempt fails at once.
    const bin = join(REPO_ROOT, 'node_modules', 'prebuild-install', 'bin.js');
    const unreachable = 'http://127.0.0.1:9';
    const result = await run(
      process.execPath,
      [bin, '--verbose'],
      { https_proxy: unreachable, HTTPS_PROXY: unreachable, npm_config_https_proxy: unreachable },
      copy,
    );
    expect(result.stderr).toContain('found local prebuild');
    expect(result.stderr).toContain(
      `unpack required ${join(copy, 'build', 'Release', 'better_sqlite3.node')} successfully`,
    );
    expect(result.code).toBe(0);
  });

  it('refuses an unknown command', async () => {
    const result = await cached('rebuild');
    expect(result).toMatchObject({
      code: 2,
      stderr: 'usage: native-cache.sh dir | rc | build <node-dir> | store\n',
    });
  });
});
