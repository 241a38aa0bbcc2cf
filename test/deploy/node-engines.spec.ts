/**
 * package.json `engines.node` is true for every installed package (issue 16 item 8): `npm ci` on a
 * supported Node prints no EBADENGINE. scripts/check-engines.js walks node_modules offline; .ci/run
 * runs it after `npm ci`. The three transitive packages that declared Node >= 22 (content-disposition,
 * cookie, file-type) are pinned by package.json `overrides` to releases that support Node 20, and
 * `--exercise` uses each once through the package that depends on it.
 */
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { REPO_ROOT } from '../support/docker-emulation';

const SCRIPT = join(REPO_ROOT, 'scripts', 'check-engines.js');

async function check(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await promisify(execFile)(process.execPath, [SCRIPT, ...args], {
      cwd: REPO_ROOT,
    });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

describe('scripts/check-engines.js', () => {
  it('finds no installed package whose engines.node misses part of the declared range or this Node', async () => {
    const result = await check([]);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
  });

  it('uses the pinned content-disposition, cookie and file-type through their dependents on this Node', async () => {
    const result = await check(['--exercise']);
    expect(result.code).toBe(0);
    expect(JSON.parse(result.stdout)).toEqual({
      contentDisposition: 'attachment; filename=report.txt',
      downloadBody: 'hello',
      cookie: 'session=a%20b',
      pngIsPng: true,
      textIsPng: false,
    });
  });

  describe('on a tree with a package that needs a newer Node', () => {
    let root: string;
    beforeAll(() => {
      root = mkdtempSync(join(tmpdir(), 'ql-engines-spec-'));
      const pkg = (dir: string, body: object) => {
        mkdirSync(join(root, dir), { recursive: true });
        writeFileSync(join(root, dir, 'package.json'), JSON.stringify(body));
      };
      // Every Node of the matrix (20, 22, 24) is inside: only the two packages are problems, on each.
      pkg('.', { name: 'app', engines: { node: '^20.19.0 || ^22.13.0 || ^24.11.0' } });
      pkg('node_modules/ok', { version: '1.0.0', engines: { node: '>=18' } });
      pkg('node_modules/@scope/parent/node_modules/cookie', { version: '2.0.2', engines: { node: '>=22' } });
      pkg('node_modules/odd-only', { version: '1.0.0', engines: { node: '^20.19.0 || ^24' } });
      pkg('outside', { name: 'app', engines: { node: '<20' } });
    });
    afterAll(() => rmSync(root, { recursive: true, force: true }));

    it('fails and names each package, nested ones included, and the range it needs', async () => {
      const result = await check([root]);
      expect(result.code).toBe(1);
      expect(result.stderr).toContain(
        'node_modules/@scope/parent/node_modules/cookie@2.0.2 requires node >=22',
      );
      expect(result.stderr).toContain('node_modules/odd-only@1.0.0 requires node ^20.19.0 || ^24');
      expect(result.stderr).not.toContain('node_modules/ok@');
      expect(result.stderr).toContain('2 problem(s)');
      expect(result.stderr).not.toContain('this Node');
    });

    it('fails when the Node it runs on is outside the declared range', async () => {
      const result = await check([join(root, 'outside')]);
      expect(result.code).toBe(1);
      expect(result.stderr).toContain(
        `this Node ${process.version} is outside the declared engines.node <20`,
      );
      expect(result.stderr).toContain('1 problem(s)');
    });
  });
});
