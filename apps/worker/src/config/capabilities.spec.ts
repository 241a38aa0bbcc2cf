import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pythonSemver, systemHostProbe } from './capabilities';

/**
 * The python runtime a worker registers comes from a real `python3 --version` at start. A python3 that
 * is slow to start (a loaded machine, a router's flash) must still be found: left out, python tasks are
 * never placed on the worker and wait in the queue without a word.
 */
describe('systemHostProbe: python3 --version', () => {
  let bin: string;
  const path = process.env.PATH;
  beforeEach(() => {
    bin = mkdtempSync(join(tmpdir(), 'ql-python-probe-'));
  });
  afterEach(() => {
    process.env.PATH = path;
    rmSync(bin, { recursive: true, force: true });
  });

  /** A `python3` first on PATH that answers after `seconds`. */
  const slowPython = (seconds: number) => {
    const file = join(bin, 'python3');
    writeFileSync(file, `#!/bin/sh\nsleep ${seconds}\necho "Python 3.11.7"\n`);
    chmodSync(file, 0o755);
    process.env.PATH = `${bin}:${path}`;
  };

  it('a python3 that takes 3 s to answer is still found', async () => {
    slowPython(3);
    expect(pythonSemver(await systemHostProbe.python3VersionOutput())).toBe('3.11.7');
  }, 20_000);
});
