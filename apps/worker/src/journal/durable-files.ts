import { randomBytes } from 'node:crypto';
import {
  closeSync,
  constants,
  fchmodSync,
  fsyncSync,
  openSync,
  renameSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import { join } from 'node:path';

/**
 * Durable file steps of the journal folder, all synchronous (ADR 0041): the journal is the folder's
 * one owner and each step is one or two system calls, so a thread-pool round trip per call (the
 * promise API) costs more than the call itself.
 */

/** Temp files start with this; a crash may leave one behind and the owner removes it on open. */
export const TEMP_PREFIX = '.tmp-';

/** fsync of a folder: makes a rename or unlink in it durable. */
export function syncFolder(dir: string): void {
  const fd = openSync(dir, constants.O_RDONLY | constants.O_DIRECTORY);
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** Writes every byte of `bytes` at `position` (a regular file may take fewer bytes per call). */
export function writeFully(fd: number, bytes: Buffer, position: number): void {
  let done = 0;
  while (done < bytes.length) {
    const n = writeSync(fd, bytes, done, bytes.length - done, position + done);
    if (n <= 0) throw new Error(`write of ${bytes.length} bytes stopped after ${done}`);
    done += n;
  }
}

/**
 * A fresh 0600 temp file holding `bytes`, fsynced, still open: the caller renames it into place and
 * may go on writing through `fd` (the descriptor follows the file, not its name).
 */
export function createTempFile(dir: string, bytes: Buffer): { readonly fd: number; readonly path: string } {
  const path = join(dir, `${TEMP_PREFIX}${randomBytes(8).toString('hex')}`);
  const fd = openSync(path, 'wx+', 0o600);
  try {
    fchmodSync(fd, 0o600); // exact, whatever the umask
    writeFully(fd, bytes, 0);
    fsyncSync(fd);
    return { fd, path };
  } catch (error) {
    closeSync(fd);
    unlinkQuietly(path);
    throw error;
  }
}

/** Replaces `dir/name` with `bytes` atomically: temp file, fsync, rename, fsync of the folder. */
export function writeFileAtomic(dir: string, name: string, bytes: string): void {
  const temp = createTempFile(dir, Buffer.from(bytes, 'utf8'));
  closeSync(temp.fd);
  try {
    renameSync(temp.path, join(dir, name));
  } catch (error) {
    unlinkQuietly(temp.path);
    throw error;
  }
  syncFolder(dir);
}

export function unlinkQuietly(path: string): void {
  try {
    unlinkSync(path);
  } catch {
    // already gone, or the folder went: nothing to clean up
  }
}
