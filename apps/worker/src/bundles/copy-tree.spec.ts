// Issue 19 (ADR 0051): the attempt's copy of a bundle, on a real disk — every file a file of its own,
// modes kept, links copied as links and never followed, nothing but folders, files and links.
import { execFileSync } from 'node:child_process';
import {
  chmodSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readlinkSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { copyTree } from './copy-tree';

describe('copyTree', () => {
  let root: string;
  beforeEach(() => {
    root = mkdtempSync(join(tmpdir(), 'ql-copy-tree-'));
  });
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  it('copies folders, files with their modes, and links verbatim; each file is a new one', async () => {
    const src = join(root, 'src');
    mkdirSync(join(src, 'lib/deep'), { recursive: true });
    writeFileSync(join(src, 'run.sh'), 'echo hi\n', { mode: 0o755 });
    // More entries than a batch, so the copy yields to the event loop between batches.
    for (let i = 0; i < 150; i++) writeFileSync(join(src, 'lib/deep', `f${i}.txt`), `file ${i}`);
    chmodSync(join(src, 'lib'), 0o750);
    symlinkSync('deep/f1.txt', join(src, 'lib/inside'));
    symlinkSync('/nonexistent/target', join(src, 'dangling'));
    const dest = join(root, 'dest');
    await copyTree(src, dest);
    expect(readFileSync(join(dest, 'run.sh'), 'utf8')).toBe('echo hi\n');
    expect(lstatSync(join(dest, 'run.sh')).mode & 0o777).toBe(0o755);
    expect(lstatSync(join(dest, 'lib')).mode & 0o777).toBe(0o750);
    for (let i = 0; i < 150; i++) {
      const name = join('lib/deep', `f${i}.txt`);
      expect(readFileSync(join(dest, name), 'utf8')).toBe(`file ${i}`);
      expect(lstatSync(join(dest, name)).ino).not.toBe(lstatSync(join(src, name)).ino);
    }
    expect(readlinkSync(join(dest, 'lib/inside'))).toBe('deep/f1.txt');
    expect(readlinkSync(join(dest, 'dangling'))).toBe('/nonexistent/target');
    // A write to the copy leaves the source as it was.
    writeFileSync(join(dest, 'run.sh'), 'poisoned');
    expect(readFileSync(join(src, 'run.sh'), 'utf8')).toBe('echo hi\n');
  });

  it('refuses a destination that exists, and anything but folders, files and links', async () => {
    const src = join(root, 'src');
    mkdirSync(src);
    mkdirSync(join(root, 'taken'));
    await expect(copyTree(src, join(root, 'taken'))).rejects.toMatchObject({ code: 'EEXIST' });
    execFileSync('mkfifo', [join(src, 'pipe')]);
    await expect(copyTree(src, join(root, 'dest'))).rejects.toThrow(/neither a folder, a file nor a link/);
  });
});
