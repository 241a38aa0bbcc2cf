import { lstat, readFile, readdir } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { parseArgs } from 'node:util';
import { gzipSync } from 'node:zlib';
import { ApiKeyRecord, DomainError, ValidationError } from '@ql/domain';
import { BUNDLE_LIMITS, TarInput, writeTar } from '@ql/contracts';
import type { BundlesService } from './bundles.service';

/** What `npm run bundle -- …` asks for (ADR 0051), read before the database is opened. */
export type BundleCommand =
  | { readonly action: 'push'; readonly path: string }
  | { readonly action: 'list'; readonly query: Record<string, string> }
  | { readonly action: 'delete'; readonly digest: string };

export function parseBundleCommand(args: string[]): BundleCommand {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: { after: { type: 'string' }, limit: { type: 'string' } },
  });
  const [action, ...rest] = positionals;
  if (action === 'push' && rest.length === 1) return { action, path: rest[0]! };
  if (action === 'list' && rest.length === 0) {
    const query = Object.fromEntries(
      Object.entries({ after: values.after, limit: values.limit }).filter(([, v]) => v !== undefined),
    ) as Record<string, string>;
    return { action, query };
  }
  if (action === 'delete' && rest.length === 1) return { action, digest: rest[0]! };
  throw new ValidationError('bundle', 'expects push <folder|file>, list or delete <digest>');
}

/**
 * A folder packed as the upload route stores it: every file and folder under it, in code-unit order,
 * mtime 0, no owners (the same folder packs to the same digest). A link is refused: what it points
 * to would not travel with the bundle.
 */
export async function packFolder(root: string): Promise<Buffer> {
  const entries: TarInput[] = [];
  const walk = async (relative: string) => {
    const names = (await readdir(join(root, relative))).sort();
    for (const name of names) {
      const path = relative ? `${relative}/${name}` : name;
      const stat = await lstat(join(root, path));
      if (stat.isDirectory()) {
        entries.push({ path, type: 'directory', mode: 0o755 });
        await walk(path);
      } else if (stat.isFile()) {
        entries.push({
          path,
          type: 'file',
          mode: stat.mode & 0o100 ? 0o755 : 0o644,
          data: await readFile(join(root, path)),
        });
      } else
        throw new ValidationError(
          'bundle',
          'unsupported_entry',
          `bundle: ${path} is not a file or folder (links are not packed)`,
        );
      if (entries.length > BUNDLE_LIMITS.maxFiles)
        throw new ValidationError(
          'bundle',
          'too_many_files',
          `bundle: more than ${BUNDLE_LIMITS.maxFiles} entries`,
        );
    }
  };
  await walk('');
  return gzipSync(writeTar(entries));
}

/** The body and media type a path uploads as: a folder packed, a `.tar.gz` as is, else one file. */
export async function uploadOf(
  path: string,
): Promise<{ body: Buffer; mediaType: string; query: Record<string, string> }> {
  const stat = await lstat(path);
  if (stat.isDirectory()) return { body: await packFolder(path), mediaType: 'application/gzip', query: {} };
  const body = await readFile(path);
  if (/\.(tar\.gz|tgz)$/.test(path)) return { body, mediaType: 'application/gzip', query: {} };
  return { body, mediaType: 'application/octet-stream', query: { name: basename(path) } };
}

/** Runs it: the answer as JSON on stdout; a refused bundle exits 2, an unknown or pinned one 1. */
export async function runBundleCommand(
  command: BundleCommand,
  service: BundlesService,
  write: (text: string) => void,
  warn: (text: string) => void,
): Promise<number> {
  const cli = { id: 'cli' } as ApiKeyRecord;
  try {
    let answer: unknown;
    if (command.action === 'push') {
      const upload = await uploadOf(command.path);
      answer = await service.push(cli, upload.body, upload.mediaType, upload.query);
    } else if (command.action === 'list') answer = await service.list(command.query);
    else answer = await service.delete(cli, command.digest);
    write(`${JSON.stringify(answer, null, 2)}\n`);
    return 0;
  } catch (error) {
    if (!(error instanceof DomainError)) throw error;
    const reason = (error as { reason?: string }).reason;
    warn(`bundle: ${error.message}${reason && !error.message.includes(reason) ? ` (${reason})` : ''}\n`);
    return error.kind === 'validation' ? 2 : 1;
  }
}
