import { randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import { link, open, rename, unlink } from 'node:fs/promises';
import { join } from 'node:path';

/** Temp files start with this; a crash may leave one behind and the owner removes it on open. */
export const TEMP_PREFIX = '.tmp-';

/** fsync of a folder: makes a rename or unlink in it durable. */
export async function syncFolder(dir: string): Promise<void> {
  const handle = await open(dir, constants.O_RDONLY | constants.O_DIRECTORY);
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** Writes a fresh 0600 temp file with `bytes`, fsynced; returns its path. */
export async function writeTempFile(dir: string, bytes: string): Promise<string> {
  const path = join(dir, `${TEMP_PREFIX}${randomBytes(8).toString('hex')}`);
  const handle = await open(path, 'wx', 0o600);
  try {
    await handle.chmod(0o600); // exact, whatever the umask
    await handle.writeFile(bytes, 'utf8');
    await handle.sync();
  } finally {
    await handle.close();
  }
  return path;
}

/** Replaces `dir/name` with `bytes` atomically: temp file, fsync, rename, fsync of the folder. */
export async function writeFileAtomic(dir: string, name: string, bytes: string): Promise<void> {
  const temp = await writeTempFile(dir, bytes);
  try {
    await rename(temp, join(dir, name));
  } catch (error) {
    await unlink(temp).catch(() => undefined);
    throw error;
  }
  await syncFolder(dir);
}

/** Creates `dir/name` with `bytes` only if it does not exist yet (link fails with EEXIST); durable. */
export async function createFileExclusive(dir: string, name: string, bytes: string): Promise<boolean> {
  const temp = await writeTempFile(dir, bytes);
  try {
    await link(temp, join(dir, name));
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw error;
  } finally {
    await unlink(temp);
    await syncFolder(dir);
  }
}
