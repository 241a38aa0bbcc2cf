import { createReadStream } from 'node:fs';
import { copyFile, lstat, mkdir, open, symlink } from 'node:fs/promises';
import type { FileHandle } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { BUNDLE_LIMITS, BundleArchiveError, BundleLimits, BundleSummary, readBundle } from '@ql/contracts';

/**
 * Unpacks a verified `.tar.gz` into `dest` (a fresh folder), under the reader's rules (ADR 0051), and
 * two more on the disk itself: no entry is written through an existing link (each parent is checked
 * with `lstat`, and every file is created with O_EXCL, so no link is followed), and a hard link is
 * written as a copy of the earlier file. Folders 0755, files 0644 or 0755: nothing setuid, nothing
 * group- or world-writable.
 */
export async function unpackBundle(
  archivePath: string,
  dest: string,
  limits: BundleLimits = BUNDLE_LIMITS,
): Promise<BundleSummary> {
  await mkdir(dest, { mode: 0o755 });
  let file: FileHandle | null = null;
  const made = new Set<string>(['']);
  const parentOf = async (path: string) => {
    const parent = dirname(path) === '.' ? '' : dirname(path);
    if (!made.has(parent)) await ensureFolder(parent);
  };
  const ensureFolder = async (path: string) => {
    // Each level once, from the root down; a level that exists must be a real folder, never a link.
    const parts = path.split('/');
    for (let i = 1; i <= parts.length; i++) {
      const sub = parts.slice(0, i).join('/');
      if (made.has(sub)) continue;
      const full = join(dest, sub);
      const stat = await lstat(full).catch(() => null);
      if (stat === null) await mkdir(full, { mode: 0o755 });
      else if (!stat.isDirectory())
        throw new BundleArchiveError('through_link', `"${path}" lies under "${sub}"`);
      made.add(sub);
    }
  };
  try {
    return await readBundle(
      createReadStream(archivePath),
      async (event) => {
        if (event.kind === 'data') {
          await file!.write(event.chunk);
          return;
        }
        if (event.kind === 'end') {
          await file?.close();
          file = null;
          return;
        }
        const { entry } = event;
        const full = join(dest, entry.path);
        if (entry.type === 'directory') return ensureFolder(entry.path);
        await parentOf(entry.path);
        if (entry.type === 'symlink') return symlink(entry.linkTarget!, full);
        if (entry.type === 'hardlink') {
          // A copy, not a link: the target was written by this unpack, inside `dest`.
          await copyFile(join(dest, entry.linkTarget!), full, 1 /* COPYFILE_EXCL */);
          return;
        }
        file = await open(full, 'wx', entry.mode);
      },
      limits,
    );
  } finally {
    await (file as FileHandle | null)?.close().catch(() => undefined);
  }
}
