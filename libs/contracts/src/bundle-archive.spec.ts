import { gzipSync } from 'node:zlib';
import { BUNDLE_LIMITS, BundleArchiveError, BundleLimits, TarEvent, readBundle } from './bundle-archive';
import { writeTar } from './bundle-tar-writer';
import { craftedBundle, linkChainEntries } from '../../../test/support/bundle-fixtures';
import { readBundleTree } from './bundle-archive';

async function refusal(bundle: Buffer, limits: BundleLimits = BUNDLE_LIMITS): Promise<string> {
  try {
    await readBundle(bundle, undefined, limits);
  } catch (error) {
    if (error instanceof BundleArchiveError) return error.rule;
    throw error;
  }
  return '';
}

describe('bundle archives (ADR 0051)', () => {
  it('reads back what the writer wrote, long paths included', async () => {
    const long = `${'d'.repeat(60)}/${'e'.repeat(60)}/script.js`;
    const tar = writeTar([
      { path: 'scripts', type: 'directory', mode: 0o755 },
      { path: 'scripts/a.js', type: 'file', mode: 0o644, data: Buffer.from('console.log(1)\n') },
      { path: long, type: 'file', mode: 0o755, data: Buffer.alloc(1000, 7) },
    ]);
    const events: TarEvent[] = [];
    const summary = await readBundle(gzipSync(tar), (e) => void events.push(e));
    expect(summary).toEqual({ files: 3, unpackedBytes: 15 + 1000 });
    const entries = events.flatMap((e) => (e.kind === 'entry' ? [e.entry] : []));
    expect(entries.map((e) => [e.path, e.type, e.mode])).toEqual([
      ['scripts', 'directory', 0o755],
      ['scripts/a.js', 'file', 0o644],
      [long, 'file', 0o755],
    ]);
    const data = Buffer.concat(events.flatMap((e) => (e.kind === 'data' ? [e.chunk] : [])));
    expect(data.length).toBe(1015);
  });

  it('writes the same bytes for the same entries (content addressing)', () => {
    const entries = [{ path: 'a.py', type: 'file' as const, mode: 0o644, data: Buffer.from('print(1)') }];
    expect(gzipSync(writeTar(entries)).equals(gzipSync(writeTar(entries)))).toBe(true);
  });

  it.each([
    ['an absolute path', [['/etc/passwd', '0', 'x']], 'absolute_path'],
    ['a .. segment', [['a/../../x', '0', 'x']], 'parent_segment'],
    ['a symlink out', [['out', '2', '../../etc']], 'link_out'],
    ['an absolute symlink', [['out', '2', '/etc/passwd']], 'link_out'],
    [
      'a file written through a link',
      [
        ['l', '2', '.'],
        ['l/x', '0', 'x'],
      ],
      'through_link',
    ],
    ['a hard link to nothing of the bundle', [['h', '1', 'etc/passwd']], 'link_out'],
    ['a character device', [['dev', '3']], 'unsupported_entry'],
    ['a FIFO', [['fifo', '6']], 'unsupported_entry'],
    [
      'a duplicate path',
      [
        ['a', '0', '1'],
        ['a', '0', '2'],
      ],
      'duplicate_path',
    ],
    [
      'a file under a file',
      [
        ['a', '0', '1'],
        ['a/b', '0', '2'],
      ],
      'bad_path',
    ],
  ] as const)('refuses %s', async (_what, entries, rule) => {
    expect(await refusal(craftedBundle(entries as unknown as [string, string, string?][]))).toBe(rule);
  });

  it('accepts a link that stays inside, and a hard link to an earlier file', async () => {
    const summary = await readBundle(
      craftedBundle([
        ['lib', '5'],
        ['lib/a.js', '0', 'x'],
        ['b.js', '2', 'lib/a.js'],
        ['c.js', '1', 'lib/a.js'],
      ]),
    );
    expect(summary.files).toBe(4);
  });

  it.each([
    ['in order', false],
    ['each naming a later one', true],
  ])(
    'refuses a chain of relative links that leads out of the bundle through one another (%s)',
    async (_what, reversed) => {
      expect(await refusal(craftedBundle(linkChainEntries(reversed)))).toBe('link_out');
      // Its first link alone stays inside; one step through it does not.
      expect(await refusal(craftedBundle(linkChainEntries().slice(0, 2)))).toBe('');
    },
  );

  it('refuses a link that loops; follows links to links that stay inside', async () => {
    expect(await refusal(craftedBundle([['l', '2', 'l']]))).toBe('link_out');
    const tree = await readBundleTree(
      craftedBundle([
        ['v2/jobs', '5'],
        ['v2/jobs/a.js', '0', 'x'],
        ['current', '2', 'v2'],
        ['jobs', '2', 'current/jobs'],
      ]),
    );
    expect(tree.resolve('jobs/a.js')).toEqual({ kind: 'inside', path: 'v2/jobs/a.js' });
    expect([tree.isFolder('jobs'), tree.isFolder('current'), tree.isFolder('jobs/a.js')]).toEqual([
      true,
      true,
      false,
    ]);
    expect(tree.folderList(10)).toEqual({ names: ['v2', 'v2/jobs'], total: 2 });
  });

  it('refuses too many files', async () => {
    const many = Array.from({ length: 11 }, (_, i) => [`f${i}`, '0', ''] as [string, string, string]);
    expect(await refusal(craftedBundle(many), { ...BUNDLE_LIMITS, maxFiles: 10 })).toBe('too_many_files');
  });

  it('refuses content over the unpacked bound', async () => {
    const tar = writeTar([{ path: 'big', type: 'file', mode: 0o644, data: Buffer.alloc(4096) }]);
    expect(await refusal(gzipSync(tar), { ...BUNDLE_LIMITS, maxUnpackedBytes: 4095 })).toBe('too_big');
  });

  it('stops a gzip bomb at the bound, whatever its headers claim', async () => {
    // 64 MiB of zeros compresses to ~64 KiB: the reader must stop at the limit, not inflate it all.
    const bomb = gzipSync(Buffer.alloc(64 * 1024 * 1024));
    expect(bomb.length).toBeLessThan(256 * 1024);
    const rule = await refusal(bomb, { ...BUNDLE_LIMITS, maxUnpackedBytes: 1024 * 1024, maxFiles: 10 });
    // All zeros read as the end marker, then trailing zeros: the gunzip bound ends it first.
    expect(rule).toBe('too_big');
  });

  it('refuses what is not gzip, and a truncated archive', async () => {
    expect(await refusal(Buffer.from('plain text, not a bundle'))).toBe('not_gzip');
    const tar = writeTar([{ path: 'a', type: 'file', mode: 0o644, data: Buffer.alloc(2000, 1) }]);
    expect(await refusal(gzipSync(tar.subarray(0, 1024)))).toBe('truncated');
  });
});
