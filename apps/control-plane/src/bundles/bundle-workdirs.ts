import { Inject, Injectable } from '@nestjs/common';
import {
  BUNDLE_REPOSITORY,
  BundleRecord,
  BundleRepository,
  IllegalStateError,
  TaskBundle,
  ValidationError,
} from '@ql/domain';
import { BundleArchiveError, readBundleTree } from '@ql/contracts';

/** Bytes read from the database per step of a stored bundle: bounds the memory one read holds. */
export const BUNDLE_CHUNK_BYTES = 1024 * 1024;

/** How many of a bundle's folders a refused `workdir` names. */
export const WORKDIR_FOLDERS_NAMED = 20;

/** A stored bundle's bytes in 1 MiB reads (ADR 0051); a bundle gone mid-read ends with an error. */
export async function* bundleChunks(
  repository: BundleRepository,
  bundle: BundleRecord,
): AsyncGenerator<Buffer> {
  for (let offset = 0; offset < bundle.sizeBytes; offset += BUNDLE_CHUNK_BYTES) {
    const part = await repository.readChunk(bundle.digest, offset, BUNDLE_CHUNK_BYTES);
    // Gone mid-stream (deleted once nothing pinned it): the answer ends short, the worker refuses it.
    if (part === null || part.length === 0) throw new IllegalStateError(`bundle ${bundle.digest} went away`);
    yield part;
  }
}

/**
 * Issue 29 item 2 (ADR 0051): a task's `workdir` must be a folder of the bundle it pins — named or
 * implied by a path under it, reached through the bundle's links as the worker will — else the task
 * write is 400 naming the folders there are, rather than every run failing `bundle_workdir_missing`.
 * Read from the stored archive at the write (a bundle never changes); `.` needs no read.
 */
@Injectable()
export class BundleWorkdirs {
  constructor(@Inject(BUNDLE_REPOSITORY) private readonly bundles: BundleRepository) {}

  async check(pinned: TaskBundle | undefined): Promise<void> {
    if (!pinned || pinned.workdir === '.') return;
    const bundle = await this.bundles.find(pinned.digest);
    // Unknown: the task write refuses it (`unknown_bundle`) under the bundle row's lock.
    if (!bundle) return;
    let tree;
    try {
      tree = await readBundleTree(bundleChunks(this.bundles, bundle));
    } catch (error) {
      if (error instanceof BundleArchiveError)
        throw new ValidationError(
          'bundle',
          error.rule,
          `bundle: the stored bundle breaks an unpack rule: ${error.message}`,
        );
      throw error;
    }
    if (tree.isFolder(pinned.workdir)) return;
    const { names, total } = tree.folderList(WORKDIR_FOLDERS_NAMED);
    const folders =
      total === 0
        ? 'the bundle has no folder: leave workdir out (".", its root)'
        : `its folders: ${names.map((n) => JSON.stringify(n)).join(', ')}${total > names.length ? ` and ${total - names.length} more` : ''}; "." is its root`;
    throw new ValidationError(
      'bundle.workdir',
      'not_a_folder',
      `bundle.workdir: not_a_folder (${JSON.stringify(pinned.workdir)} is not a folder of the bundle; ${folders})`,
    );
  }
}
