import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ApiKeyRepository, ConsoleSessionRepository, UnavailableError } from '@ql/domain';
import { AdminRefusal, renderAdminError } from '../http/admin-errors';
import { ADMIN_EDGE } from '../http/edge';
import type { ControlPlaneMetrics } from '../metrics/control-plane-metrics';
import { AdminRequest, authorizeAdminRequest } from '../identity/api-key.guard';
import { BUNDLES_ROUTE, BUNDLE_UPLOAD_ROLE } from './bundles.controllers';
import { BUNDLE_MEDIA_TYPES, bundleLimitText } from './bundles.service';

const UPLOAD_PATH = `/${BUNDLES_ROUTE}`;
/** A busy upload slot frees within seconds at the admin listener's pace: ask again after this. */
const BUSY_RETRY_AFTER_SECONDS = 1;

export interface BundleUploadOptions {
  /** QL_BUNDLE_MAX_BYTES: the raw body's limit on the upload route. */
  readonly maxBytes: number;
  /** QL_BUNDLE_UPLOADS_MAX: uploads whose body is being read at once; past it 503 with Retry-After. */
  readonly maxConcurrent: number;
  readonly keys: Pick<ApiKeyRepository, 'findActiveByDigest'>;
  readonly sessions: Pick<ConsoleSessionRepository, 'findLive'>;
  /** `ql_bundle_uploads_receiving` follows the slots taken. */
  readonly metrics: Pick<ControlPlaneMetrics, 'bundleUploadReceiving'>;
}

/**
 * Bundle uploads at the admin edge (ADR 0051, issue 27 item 6). The raw-body parser
 * (`application/gzip`, `application/octet-stream`, up to `maxBytes`, read into one Buffer) serves
 * `POST /api/v1/bundles` alone; every other admin route keeps the 128 KiB JSON limit. A hook runs
 * before any body is read: a raw body sent to another route is 415, and the upload route runs the
 * guard's key and role rule first (401/403 unread) and takes one of `maxConcurrent` slots (503
 * `bundle_uploads_busy` beyond them), so only admins' bodies are read, a bounded number at a time.
 * The Nest guard still runs on the route (defence in depth).
 */
export function configureBundleUploads(fastify: FastifyInstance, options: BundleUploadOptions): void {
  let reading = 0;
  // Callback style: the request's body stays unread until `done`.
  fastify.addHook('onRequest', (request, reply, done) => {
    if (request.method !== 'POST' || request.url.split('?')[0] !== UPLOAD_PATH) {
      const mediaType = mediaTypeOf(request);
      if (carriesBody(request) && BUNDLE_MEDIA_TYPES.includes(mediaType as never))
        return refuseUnread(
          request,
          reply,
          new AdminRefusal(
            415,
            'unsupported_media_type',
            `an ${mediaType} body is taken by POST ${UPLOAD_PATH} only`,
          ),
        );
      return done();
    }
    authorizeAdminRequest(request as AdminRequest, BUNDLE_UPLOAD_ROLE, options.keys, options.sessions).then(
      () => {
        if (reading >= options.maxConcurrent) {
          void reply.header('retry-after', String(BUSY_RETRY_AFTER_SECONDS));
          return refuseUnread(
            request,
            reply,
            new UnavailableError(
              'bundle_uploads_busy',
              `${options.maxConcurrent} bundle uploads are being received (QL_BUNDLE_UPLOADS_MAX): retry after ${BUSY_RETRY_AFTER_SECONDS} s`,
            ),
          );
        }
        reading++;
        options.metrics.bundleUploadReceiving(1);
        // The answer sent or the connection gone: either way this upload holds its slot no longer.
        reply.raw.once('close', () => {
          reading--;
          options.metrics.bundleUploadReceiving(-1);
        });
        done();
      },
      (error: unknown) => refuseUnread(request, reply, error),
    );
  });
  // Read here rather than with `parseAs` so a body over the limit (chunked: no length to refuse up
  // front) is answered with the limit and the setting that sets it, not fastify's bare "too large".
  fastify.addContentTypeParser([...BUNDLE_MEDIA_TYPES], (request, payload, done) => {
    if (request.method !== 'POST' || request.url.split('?')[0] !== UPLOAD_PATH) {
      done(
        new AdminRefusal(415, 'unsupported_media_type', 'a raw body is taken by the bundle upload only'),
        undefined,
      );
      return;
    }
    if (Number(request.headers['content-length']) > options.maxBytes) {
      done(bundleTooLarge(options.maxBytes, Number(request.headers['content-length'])), undefined);
      return;
    }
    const chunks: Buffer[] = [];
    let received = 0;
    const onData = (chunk: Buffer) => {
      received += chunk.length;
      if (received > options.maxBytes) {
        stop();
        done(bundleTooLarge(options.maxBytes), undefined);
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = (error?: Error) => {
      stop();
      if (error) done(error, undefined);
      else done(null, Buffer.concat(chunks, received));
    };
    const stop = () => {
      payload.removeListener('data', onData);
      payload.removeListener('end', onEnd);
      payload.removeListener('error', onEnd);
    };
    payload.on('data', onData);
    payload.on('end', onEnd);
    payload.on('error', onEnd);
    payload.resume();
  });
}

/** 413 for an upload over QL_BUNDLE_MAX_BYTES, saying the limit and the setting that raises it. */
function bundleTooLarge(maxBytes: number, length?: number): AdminRefusal {
  return new AdminRefusal(
    413,
    'request_too_large',
    `the bundle${length === undefined ? '' : ` (${length} bytes)`} is over the limit: ${bundleLimitText(maxBytes)}`,
  );
}

function mediaTypeOf(request: FastifyRequest): string {
  return (request.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
}

function carriesBody(request: FastifyRequest): boolean {
  const { headers } = request;
  return headers['transfer-encoding'] !== undefined || Number(headers['content-length'] ?? 0) > 0;
}

/** Answers without reading the body; the connection closes after it (what is still coming is dropped). */
function refuseUnread(request: FastifyRequest, reply: FastifyReply, error: unknown): FastifyReply {
  const problem = renderAdminError(error);
  if (carriesBody(request)) void reply.header('connection', 'close');
  return reply.code(problem.status).type(ADMIN_EDGE.contentType).send(problem);
}
