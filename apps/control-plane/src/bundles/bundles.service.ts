import { createHash } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import { Inject, Injectable } from '@nestjs/common';
import {
  ApiKeyRecord,
  BUNDLE_DIGEST_PATTERN,
  BUNDLE_REPOSITORY,
  BundleRecord,
  BundleRepository,
  NotFoundError,
  ValidationError,
  readObject,
  readString,
} from '@ql/domain';
import { BundleArchiveError, readBundle, writeTar } from '@ql/contracts';
import { CONFIG } from '../core/core';
import { ControlPlaneConfig } from '../config/config';
import { readLimit } from '../admin/query-params';

/** A single uploaded file's name: one plain file name, no folder. */
export const BUNDLE_FILE_NAME_PATTERN = /^[A-Za-z0-9_@+-][A-Za-z0-9_.@+-]{0,254}$/;

/** The two raw bodies the upload takes: a `.tar.gz`, or one file (named by `?name=`). */
export const BUNDLE_MEDIA_TYPES = ['application/gzip', 'application/octet-stream'] as const;

/**
 * Issue 19 item 1 (ADR 0051): push, list, read and delete script bundles. An upload is validated by
 * the same reader the worker unpacks with, so a bundle the worker would refuse is refused here first;
 * one file is packed into a one-entry `.tar.gz`, so every stored bundle has one form.
 */
/** The bundle limit as a person reads it: bytes, MiB, and the setting (issue 29 item 8). */
export function bundleLimitText(maxBytes: number): string {
  return `${maxBytes} bytes = ${Number((maxBytes / 1024 ** 2).toPrecision(3))} MiB, set by QL_BUNDLE_MAX_BYTES`;
}

@Injectable()
export class BundlesService {
  constructor(
    @Inject(BUNDLE_REPOSITORY) private readonly bundles: BundleRepository,
    @Inject(CONFIG) private readonly config: ControlPlaneConfig,
  ) {}

  async push(actor: ApiKeyRecord, body: unknown, mediaType: string | undefined, query: unknown) {
    const q = readObject(query ?? {}, 'query', ['name']);
    if (!Buffer.isBuffer(body) || !BUNDLE_MEDIA_TYPES.includes(mediaType as never))
      throw new ValidationError(
        'body',
        'must_be_bundle',
        'body: must_be_bundle (a .tar.gz as application/gzip, or one file as application/octet-stream with ?name=)',
      );
    let archive: Buffer;
    if (mediaType === 'application/gzip') {
      if (q.name !== undefined) throw new ValidationError('name', 'only_for_one_file');
      archive = body;
    } else {
      const name = readString(q.name, 'name', { max: 255, pattern: BUNDLE_FILE_NAME_PATTERN });
      archive = gzipSync(writeTar([{ path: name, type: 'file', mode: 0o644, data: body }]));
    }
    if (archive.length > this.config.bundleMaxBytes)
      throw new ValidationError(
        'body',
        'too_large',
        `body: too_large (the bundle is ${archive.length} bytes packed; the limit is ${bundleLimitText(this.config.bundleMaxBytes)})`,
      );
    let summary;
    try {
      summary = await readBundle(archive);
    } catch (error) {
      if (error instanceof BundleArchiveError)
        throw new ValidationError('bundle', error.rule, `bundle: ${error.message}; nothing was stored`);
      throw error;
    }
    const digest = createHash('sha256').update(archive).digest('hex');
    const { bundle, created } = await this.bundles.put(
      {
        digest,
        content: archive,
        files: summary.files,
        unpackedBytes: summary.unpackedBytes,
        createdBy: actor.id,
      },
      {
        actor: actor.id,
        action: 'bundle.push',
        target: `bundle:${digest}`,
        detail: { sizeBytes: archive.length, files: summary.files },
      },
    );
    return { ...toBundleView(bundle), created };
  }

  async list(query: unknown) {
    const q = readObject(query ?? {}, 'query', ['after', 'limit']);
    const after = q.after === undefined ? undefined : readDigest(q.after, 'after');
    const limit = readLimit(q.limit);
    const items = await this.bundles.list({ after, limit });
    return {
      items: items.map(toBundleView),
      nextAfter: items.length === limit ? items[items.length - 1]!.digest : null,
    };
  }

  async get(digest: string) {
    const bundle = await this.bundles.find(readDigest(digest, 'digest'));
    if (!bundle) throw new NotFoundError('bundle');
    return toBundleView(bundle);
  }

  async delete(actor: ApiKeyRecord, digest: string) {
    const d = readDigest(digest, 'digest');
    const bundle = await this.bundles.delete(d, {
      actor: actor.id,
      action: 'bundle.delete',
      target: `bundle:${d}`,
    });
    return { ...toBundleView(bundle), deleted: true as const };
  }
}

function readDigest(value: unknown, field: string): string {
  return readString(value, field, { max: 64, pattern: BUNDLE_DIGEST_PATTERN });
}

export function toBundleView(b: BundleRecord) {
  return {
    digest: b.digest,
    sizeBytes: b.sizeBytes,
    files: b.files,
    unpackedBytes: b.unpackedBytes,
    createdBy: b.createdBy,
    createdAt: new Date(b.createdAt).toISOString(),
  };
}
