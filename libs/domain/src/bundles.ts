import { ValidationError } from './errors';
import type { LeaseFenceCommand } from './activation-ports';
import type { AuditEntry } from './ports';
import { readObject, readString } from './strict';

/** A bundle is named by the SHA-256 of its stored `.tar.gz` bytes, lower-case hex (ADR 0051). */
export const BUNDLE_DIGEST_PATTERN = /^[0-9a-f]{64}$/;
/** A working folder inside a bundle: relative segments, no `.`/`..`, no backslash; `.` is its root. */
export const BUNDLE_WORKDIR_PATTERN =
  /^(\.|[A-Za-z0-9_@+-][A-Za-z0-9_.@+ -]*(\/[A-Za-z0-9_@+-][A-Za-z0-9_.@+ -]*)*)$/;
export const BUNDLE_WORKDIR_MAX_LENGTH = 512;

/** What a task revision pins (issue 19 item 2): the bundle and the folder inside it the command runs in. */
export interface TaskBundle {
  readonly digest: string;
  readonly workdir: string;
}

/** Strictly reads `bundle` of a task body; a workdir absent means the bundle's root (`.`). */
export function parseTaskBundle(value: unknown): TaskBundle {
  const raw = readObject(value, 'bundle', ['digest', 'workdir']);
  const digest = readString(raw.digest, 'bundle.digest', { max: 64, pattern: BUNDLE_DIGEST_PATTERN });
  const workdir =
    raw.workdir === undefined
      ? '.'
      : readString(raw.workdir, 'bundle.workdir', {
          max: BUNDLE_WORKDIR_MAX_LENGTH,
          pattern: BUNDLE_WORKDIR_PATTERN,
        });
  if (workdir !== '.' && workdir.split('/').some((s) => s === '..' || s === '.'))
    throw new ValidationError('bundle.workdir', 'invalid_format');
  return { digest, workdir };
}

/** A stored bundle, without its bytes. */
export interface BundleRecord {
  readonly digest: string;
  /** Bytes of the stored `.tar.gz`. */
  readonly sizeBytes: number;
  readonly files: number;
  readonly unpackedBytes: number;
  readonly createdBy: string;
  readonly createdAt: number;
}

export interface NewBundle {
  readonly digest: string;
  readonly content: Buffer;
  readonly files: number;
  readonly unpackedBytes: number;
  readonly createdBy: string;
}

/** The bundle store (content-addressed, in the database on both dialects: ADR 0051). */
export interface BundleRepository {
  /** Stores it once: the same digest again changes nothing and answers `created: false`. */
  put(bundle: NewBundle, audit: AuditEntry): Promise<{ bundle: BundleRecord; created: boolean }>;
  find(digest: string): Promise<BundleRecord | null>;
  /** Keyset on digest. */
  list(query: { after?: string; limit: number }): Promise<BundleRecord[]>;
  /** Refused with ConflictError `bundle_pinned` while a live task or an unfinished run pins it. */
  delete(digest: string, audit: AuditEntry): Promise<BundleRecord>;
  /** `length` bytes of its content from `offset` (fewer at the end); null when it is gone. */
  readChunk(digest: string, offset: number, length: number): Promise<Buffer | null>;
  /**
   * The worker's fetch: the session and lease fences of every lease call (FencedError), then the
   * lease's attempt must pin `digest` through its run's revision (NotFoundError otherwise).
   */
  authorizeFetch(command: LeaseFenceCommand, digest: string): Promise<BundleRecord>;
}
export const BUNDLE_REPOSITORY = Symbol('BundleRepository');
