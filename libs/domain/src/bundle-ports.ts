import type { LeaseFenceCommand } from './activation-ports';
import type { AuditEntry } from './ports';

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
