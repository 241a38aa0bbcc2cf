import type { FastifyInstance } from 'fastify';
import { AdminRefusal } from '../http/admin-errors';
import { BUNDLES_ROUTE } from './bundles.controllers';
import { BUNDLE_MEDIA_TYPES } from './bundles.service';

const UPLOAD_PATH = `/${BUNDLES_ROUTE}`;

/**
 * The raw-body parser of bundle uploads (ADR 0051): `application/gzip` and `application/octet-stream`
 * bodies up to `maxBytes`, read into one Buffer, and only on `POST /api/v1/bundles` — every other
 * admin route keeps the 128 KiB JSON limit, and a raw body sent anywhere else is refused unread.
 */
export function configureBundleUploads(fastify: FastifyInstance, maxBytes: number): void {
  fastify.addContentTypeParser(
    [...BUNDLE_MEDIA_TYPES],
    { parseAs: 'buffer', bodyLimit: maxBytes },
    (request, body, done) => {
      const path = request.url.split('?')[0];
      if (request.method !== 'POST' || path !== UPLOAD_PATH) {
        done(new AdminRefusal(400, 'invalid_request', 'body must be a JSON object'), undefined);
        return;
      }
      done(null, body);
    },
  );
}
