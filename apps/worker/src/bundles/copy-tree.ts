import {
  chmodSync,
  constants,
  copyFileSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readlinkSync,
  symlinkSync,
} from 'node:fs';
import { join } from 'node:path';
import { setImmediate as yieldToLoop } from 'node:timers/promises';

/** Entries copied between two turns of the event loop. */
const BATCH = 64;

/**
 * Issue 19 (ADR 0051, "as measured"): `src` (an unpacked bundle: folders, files, links) copied to
 * `dest`, which must not exist. Links are copied as links (their target verbatim, never followed),
 * files with COPYFILE_FICLONE (a reflink where the filesystem has them, else a copy) and their mode,
 * folders with theirs; anything else is refused. Synchronous calls in batches of 64 entries, the event
 * loop served between batches: on a 10 MiB, 500-file tree this is several times cheaper than
 * `fs.promises.cp` (thousands of promises through the thread pool, a `stat` of both sides per entry).
 */
export async function copyTree(src: string, dest: string): Promise<void> {
  const pending: [string, string][] = [[src, dest]];
  // A folder gets its mode once its entries are in (a read-only one could not take them).
  const folders: [string, number][] = [];
  let done = 0;
  while (pending.length > 0) {
    const [from, to] = pending.pop()!;
    const stat = lstatSync(from);
    if (stat.isDirectory()) {
      mkdirSync(to, { mode: 0o700 });
      folders.push([to, stat.mode & 0o7777]);
      for (const name of readdirSync(from)) pending.push([join(from, name), join(to, name)]);
    } else if (stat.isFile()) copyFileSync(from, to, constants.COPYFILE_EXCL | constants.COPYFILE_FICLONE);
    else if (stat.isSymbolicLink()) symlinkSync(readlinkSync(from), to);
    else throw new Error(`copyTree: ${from} is neither a folder, a file nor a link`);
    if (++done % BATCH === 0) await yieldToLoop();
  }
  for (const [folder, mode] of folders.reverse()) chmodSync(folder, mode);
}
