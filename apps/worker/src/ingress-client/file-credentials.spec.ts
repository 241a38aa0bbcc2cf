import { mkdtempSync, readFileSync, renameSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fs from 'node:fs';
import { CHECK_EVERY_MS, RACY_CHANGE_NS, fileCredentials } from './file-credentials';

let dir: string;
let paths: { caPath: string; certPath: string; keyPath: string };
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'ql-credentials-'));
  paths = { caPath: join(dir, 'ca.pem'), certPath: join(dir, 'cert.pem'), keyPath: join(dir, 'key.pem') };
  writeFileSync(paths.caPath, 'CA-1');
  writeFileSync(paths.certPath, 'CERT-1');
  writeFileSync(paths.keyPath, 'KEY-1');
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

/** A clock well past every change made so far: the files' stats can be trusted. */
const settled = () => BigInt(Date.now()) * 1_000_000n + RACY_CHANGE_NS + 1_000_000_000n;
/** Waits until the wall clock is 50 ms past `ns`, so a file change now gets a later (coarse) timestamp. */
async function clockPast(ns: bigint): Promise<void> {
  while (BigInt(Date.now()) * 1_000_000n < ns + 50_000_000n) await new Promise((r) => setImmediate(r));
}
const text = (c: { caPem: unknown; certPem: unknown; keyPem: unknown }) =>
  [c.caPem, c.certPem, c.keyPem].map((b) => (b as Buffer).toString('utf8'));

describe('fileCredentials (R-WIRE-4, ADR 0023)', () => {
  it('looks at the files at most once a second: between checks a call makes no system call', async () => {
    let mono = 1_000;
    const provider = fileCredentials(paths, { nowNs: settled, monotonicMs: () => mono });
    const first = await provider();
    const stat = jest.spyOn(fs, 'statSync');
    try {
      writeFileSync(join(dir, 'cert.new'), 'CERT-2');
      renameSync(join(dir, 'cert.new'), paths.certPath);
      mono += CHECK_EVERY_MS - 1;
      expect(await provider()).toBe(first); // not looked at yet
      expect(stat).not.toHaveBeenCalled();
      mono += 1;
      expect(text(await provider())).toEqual(['CA-1', 'CERT-2', 'KEY-1']); // a second later: rotated
      expect(stat).toHaveBeenCalledTimes(3);
    } finally {
      stat.mockRestore();
    }
  });

  it('recheck(): a renewal just renamed new files into place; the next call reads them, not a second later', async () => {
    const mono = 1_000;
    const provider = fileCredentials(paths, { nowNs: settled, monotonicMs: () => mono });
    await provider();
    writeFileSync(join(dir, 'cert.new'), 'CERT-2');
    renameSync(join(dir, 'cert.new'), paths.certPath);
    expect(text(await provider())).toEqual(['CA-1', 'CERT-1', 'KEY-1']); // within the second: not looked at
    provider.recheck();
    expect(text(await provider())).toEqual(['CA-1', 'CERT-2', 'KEY-1']);
  });

  it('returns the very same buffers while no file changed', async () => {
    const provider = fileCredentials(paths, { nowNs: settled, checkEveryMs: 0 });
    const first = await provider();
    expect(text(first)).toEqual(['CA-1', 'CERT-1', 'KEY-1']);
    const second = await provider();
    expect(second.certPem).toBe(first.certPem);
    expect(second.keyPem).toBe(first.keyPem);
    expect(second.caPem).toBe(first.caPem);
  });

  it('reads a certificate renamed over the old one on the next call', async () => {
    const provider = fileCredentials(paths, { nowNs: settled, checkEveryMs: 0 });
    await provider();
    writeFileSync(join(dir, 'cert.new'), 'CERT-2');
    writeFileSync(join(dir, 'key.new'), 'KEY-2');
    renameSync(join(dir, 'cert.new'), paths.certPath);
    renameSync(join(dir, 'key.new'), paths.keyPath);
    expect(text(await provider())).toEqual(['CA-1', 'CERT-2', 'KEY-2']);
  });

  it('reads a file rewritten in place with the same size and its mtime put back (ctime moves)', async () => {
    utimesSync(paths.certPath, 1_700_000_000, 1_700_000_000); // whole seconds: put back exactly below
    const before = statSync(paths.certPath, { bigint: true });
    const provider = fileCredentials(paths, { nowNs: settled, checkEveryMs: 0 });
    const first = await provider();
    await clockPast(before.ctimeNs); // the rewrite must land in a later timestamp tick than the stat
    const handle = await open(paths.certPath, 'r+'); // same inode, same size
    await handle.write('CERT-9', 0);
    await handle.close();
    utimesSync(paths.certPath, 1_700_000_000, 1_700_000_000);
    const after = statSync(paths.certPath, { bigint: true });
    expect([after.dev, after.ino, after.size, after.mtimeNs]).toEqual([
      before.dev,
      before.ino,
      before.size,
      before.mtimeNs,
    ]);
    const next = await provider();
    expect(text(next)).toEqual(['CA-1', 'CERT-9', 'KEY-1']);
    expect(next.certPem).not.toBe(first.certPem);
  });

  it('reads every file again while a change is too recent for its stat to be trusted', async () => {
    const lastChange = () =>
      [paths.caPath, paths.certPath, paths.keyPath]
        .map((p) => statSync(p, { bigint: true }).ctimeNs)
        .reduce((a, b) => (a > b ? a : b));
    let now = lastChange() + RACY_CHANGE_NS - 1n;
    const provider = fileCredentials(paths, { nowNs: () => now, checkEveryMs: 0 });
    const first = await provider();
    const second = await provider();
    expect(second.certPem).not.toBe(first.certPem);
    now = lastChange() + RACY_CHANGE_NS;
    const third = await provider();
    expect(await provider()).toMatchObject({ certPem: third.certPem, keyPem: third.keyPem });
  });

  it('fails while a file is missing, then reads the files once they are back', async () => {
    const provider = fileCredentials(paths, { nowNs: settled, checkEveryMs: 0 });
    await provider();
    const key = readFileSync(paths.keyPath);
    rmSync(paths.keyPath);
    await expect(provider()).rejects.toMatchObject({ code: 'ENOENT' });
    writeFileSync(paths.keyPath, key);
    expect(text(await provider())).toEqual(['CA-1', 'CERT-1', 'KEY-1']);
  });
});
