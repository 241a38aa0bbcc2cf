/**
 * `bundle` (ADR 0051): the lease holder fetches the script bundle its attempt's revision pins;
 * answered with the archive's bytes (`application/octet-stream`, its Content-Length), never JSON.
 *
 * Field history (`git log -S` on the contracts). Served since ee1a1ab (2026-12-05); first spoken by
 * a worker in 838a3a7 (2026-12-05): its v1. (The offer of a task with a bundle is itself v2:
 * `execution.spec.bundle`.)
 *
 * | field                                                     | appeared           | wire |
 * | --------------------------------------------------------- | ------------------ | ---- |
 * | request: the lease fence and `digest`                     | ee1a1ab 2026-12-05 | v1   |
 * | answer: the archive's bytes                               | ee1a1ab 2026-12-05 | v1   |
 * | refusal 404 `worker_route_not_found` (another digest)     | ee1a1ab 2026-12-05 | v1   |
 * | refusal 409 `worker_lease_fenced` `attempt_not_starting`  | f284a09 2026-12-07 | v2   |
 *
 * The archive is checked where it lands: its SHA-256 must be the digest asked for, and it is read by
 * the bundle rules (`bundle-archive.ts`) before anything is unpacked.
 */
import { BUNDLE_DIGEST_PATTERN, readString } from '@ql/domain';
import { IngressCall, KiB } from './call';
import { LeaseFenceFields, LeaseFenceRequest, buildLeaseFence, readLeaseFence } from './lease-fence';
import { SessionFenceRequest } from './session';

/** The media type of the answer: the archive's bytes, never JSON. */
export const BUNDLE_MEDIA_TYPE = 'application/octet-stream';

export const BUNDLE: IngressCall<'bundle'> = {
  action: 'bundle',
  bodyLimit: 4 * KiB,
  // The worker's bundle cache bounds the archive it accepts (its setting), not the contract.
  answerLimit: Number.MAX_SAFE_INTEGER,
  firstReleased: '838a3a7',
  since: {},
  refusals: [
    { status: 404, code: 'worker_route_not_found', since: 1 },
    { status: 409, code: 'worker_lease_fenced', reason: 'attempt_not_starting', since: 2 },
  ],
};

export interface BundleRequest extends LeaseFenceRequest {
  /** The digest the attempt's revision pins. */
  readonly digest: string;
}

/** The worker's `bundle` body in wire order. */
export function buildBundleRequest(
  fence: SessionFenceRequest,
  fields: LeaseFenceFields & { readonly digest: string },
): BundleRequest {
  return { ...buildLeaseFence(fence, fields), digest: fields.digest };
}

/** The control plane's reader of a `bundle` body (behind the DTO, ADR 0009). */
export function parseBundleRequest(body: unknown): BundleRequest {
  const fence = readLeaseFence(body, ['digest']);
  const digest = readString((body as Record<string, unknown>).digest, 'digest', {
    max: 64,
    pattern: BUNDLE_DIGEST_PATTERN,
  });
  return { ...fence, digest };
}
