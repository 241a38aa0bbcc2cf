import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import type { FastifyInstance, FastifyReply, FastifyRequest, FastifyServerOptions } from 'fastify';
import {
  INGRESS_CALLS,
  INGRESS_ENROLL_PATH,
  INGRESS_PREFIX,
  IngressCall,
  ingressBodyLimit,
  parseStrictJson,
  refuseNewerRequestFields,
} from '@ql/contracts';
import { AdminErrorCode, AdminRefusal, renderAdminError } from './admin-errors';
import { IngressRefusal, renderIngressError } from './ingress-errors';

/** What the edge refuses on its own, before any route handler or exception filter runs. */
type EdgeRefusal = 'bad_url' | 'no_route' | 'bad_request' | 'too_large' | 'timeout';

/** How one listener writes an edge refusal: its content type and its documented body (R-WIRE-3). */
export interface EdgeDialect {
  readonly contentType: string;
  refusal(kind: EdgeRefusal): { readonly status: number; readonly body: unknown };
}

const adminRefusal = (status: number, code: AdminErrorCode, message: string) => {
  const body = renderAdminError(new AdminRefusal(status, code, message));
  return { status: body.status, body };
};
const ADMIN_REFUSALS: Record<EdgeRefusal, ReturnType<typeof adminRefusal>> = {
  bad_url: adminRefusal(400, 'invalid_request', 'the URL is not valid percent-encoded UTF-8'),
  no_route: adminRefusal(404, 'route_not_found', 'no such route'),
  bad_request: adminRefusal(400, 'invalid_request', 'malformed HTTP request'),
  too_large: adminRefusal(431, 'request_too_large', 'the request head is too large'),
  timeout: adminRefusal(408, 'invalid_request', 'the request was not received in time'),
};
export const ADMIN_EDGE: EdgeDialect = {
  contentType: 'application/problem+json',
  refusal: (kind) => ADMIN_REFUSALS[kind],
};

const ingressRefusal = (status: number, code: IngressRefusal['code'], message: string) =>
  renderIngressError(new IngressRefusal(status, code, message));
// The ingress answers only the statuses of its error table: no 408, 414 or 431.
const INGRESS_REFUSALS: Record<EdgeRefusal, ReturnType<typeof ingressRefusal>> = {
  bad_url: ingressRefusal(400, 'invalid_worker_request', 'the URL is not valid percent-encoded UTF-8'),
  no_route: ingressRefusal(404, 'worker_route_not_found', 'no such ingress route'),
  bad_request: ingressRefusal(400, 'invalid_worker_request', 'malformed HTTP request'),
  too_large: ingressRefusal(413, 'worker_request_too_large', 'the request head is too large'),
  timeout: ingressRefusal(400, 'invalid_worker_request', 'the request was not received in time'),
};
export const INGRESS_EDGE: EdgeDialect = {
  contentType: 'application/json',
  refusal: (kind) => INGRESS_REFUSALS[kind],
};

/**
 * Fastify constructor options that keep the router's and Node's own answers (bad percent-encoding,
 * over-long path segment, unparsable request) in the listener's documented shape.
 */
export function edgeServerOptions(
  dialect: EdgeDialect,
): Pick<FastifyServerOptions, 'frameworkErrors' | 'clientErrorHandler'> {
  return {
    frameworkErrors: (error, _request, reply) => {
      // No route parameter of either listener is over 100 characters: such a path names no route.
      const kind = error.code === 'FST_ERR_MAX_PARAM_LENGTH' ? 'no_route' : 'bad_url';
      const { status, body } = dialect.refusal(kind);
      void (reply as FastifyReply).code(status).type(dialect.contentType).send(body);
    },
    clientErrorHandler: (error, socket) => answerClientError(dialect, error, socket),
  };
}

/** Admin edge: strict JSON bodies within the admin limit, graceful closes. */
export function configureAdminEdge(fastify: FastifyInstance, bodyLimit: number): void {
  closeGracefully(fastify, 'connection');
  fastify.addContentTypeParser(
    'application/json',
    { parseAs: 'buffer', bodyLimit },
    (_request, body, done) => {
      try {
        done(null, parseStrictJson(body as Buffer));
      } catch (error) {
        done(error as Error, undefined);
      }
    },
  );
}

const INGRESS_PATH_PREFIX = `${INGRESS_PREFIX}/`;

const bodyTooLarge = () =>
  new IngressRefusal(413, 'worker_request_too_large', 'request body is over the route limit');

/**
 * Ingress edge (R-WIRE-1, R-WIRE-2): only POST on an ingress path without a query string (404), a
 * per-route byte limit checked on Content-Length and again on the bytes read (413), strict JSON.
 */
export function configureIngressEdge(
  fastify: FastifyInstance,
  maxBody: number,
  /** Serving v1 only (ADR 0062 §8): every request is read as a v1 control plane read it. */
  v1Only = false,
): void {
  closeGracefully(fastify, 'secureConnection');
  // Callback style: an async hook costs a promise and a microtask turn on every request.
  fastify.addHook('onRequest', (request, reply, done) => {
    const { url } = request;
    if (
      request.method !== 'POST' ||
      url.includes('?') ||
      !(url.startsWith(INGRESS_PATH_PREFIX) || url === INGRESS_ENROLL_PATH)
    ) {
      refuseBeforeBody(request, reply, INGRESS_REFUSALS.no_route);
    } else if (Number(request.headers['content-length'] ?? 0) > ingressBodyLimit(actionOf(url))) {
      refuseBeforeBody(request, reply, renderIngressError(bodyTooLarge()));
    } else done();
  });
  fastify.addContentTypeParser(
    'application/json',
    { parseAs: 'buffer', bodyLimit: maxBody },
    (request, body, done) => {
      const bytes = body as Buffer;
      if (bytes.length > ingressBodyLimit(actionOf(request.url))) {
        done(bodyTooLarge(), undefined);
        return;
      }
      try {
        const json = parseStrictJson(bytes);
        if (v1Only) {
          const call = (INGRESS_CALLS as Readonly<Record<string, IngressCall>>)[actionOf(request.url)];
          if (call) refuseNewerRequestFields(call, 1, json);
        }
        done(null, json);
      } catch (error) {
        done(error as Error, undefined);
      }
    },
  );
}

const WORKER_CERTIFICATE_REQUIRED = ingressRefusal(
  401,
  'worker_authentication_required',
  'a worker client certificate the ingress trusts is required',
);

/**
 * The ingress asks for a client certificate but lets a handshake without a trusted one through, for
 * the enrollment route alone (ADR 0045 §2). This hook, the listener's first, answers 401 to every
 * other request on such a connection before routing, body parsing or any repository call; the
 * principal guard still checks who the certificate speaks for on each route (defence in depth).
 * The exception is exact: `POST` and the enrollment path, byte for byte, nothing after it.
 */
export function requireTrustedClientCertificate(fastify: FastifyInstance): void {
  fastify.addHook('onRequest', (request, reply, done) => {
    if (presentsTrustedCertificate(request.raw.socket as TLSSocket)) done();
    else if (request.method === 'POST' && request.url === INGRESS_ENROLL_PATH) done();
    else refuseBeforeBody(request, reply, WORKER_CERTIFICATE_REQUIRED);
  });
}

/** Read once per connection: a TLS connection keeps its peer for its lifetime. */
const trustedPeers = new WeakMap<TLSSocket, boolean>();

/**
 * `authorized` alone is not enough: Node calls a resumed TLS 1.3 session without a peer certificate
 * authorized (it takes a ticket for PSK authentication), and a client that handshook without a
 * certificate, for the enrollment route, holds such a ticket. A trusted certificate must be there.
 */
export function presentsTrustedCertificate(socket: TLSSocket): boolean {
  let trusted = trustedPeers.get(socket);
  if (trusted === undefined) {
    trusted = socket.authorized === true && socket.getPeerX509Certificate() !== undefined;
    trustedPeers.set(socket, trusted);
  }
  return trusted;
}

function actionOf(url: string): string {
  return url.slice(url.lastIndexOf('/') + 1);
}

/** Answers before the body is read; a body still on its way is not worth keeping the connection for. */
function refuseBeforeBody(
  request: FastifyRequest,
  reply: FastifyReply,
  { status, body }: { status: number; body: unknown },
) {
  const headers = request.headers;
  if (headers['transfer-encoding'] !== undefined || Number(headers['content-length'] ?? 0) > 0)
    void reply.header('connection', 'close');
  return reply.code(status).type(INGRESS_EDGE.contentType).send(body);
}

/** Node's answer to a request it could not parse, in the listener's shape and saying it closes. */
function answerClientError(dialect: EdgeDialect, error: Error & { code?: string }, socket: Socket): void {
  // A parser that failed once fails again on each chunk the client still sends while we linger.
  if (lingering.has(socket)) return;
  // Raw bytes after a response has started would corrupt it: Node's own handler makes the same check.
  const inFlight = (socket as { _httpMessage?: { headersSent?: boolean } })._httpMessage?.headersSent;
  // A TLS failure (a handshake timed out or broken, `tlsClientError`) has no HTTP to answer in.
  const tlsFailure = /^ERR_(TLS|SSL)_/.test(error.code ?? '');
  if (error.code === 'ECONNRESET' || tlsFailure || !socket.writable || inFlight) {
    socket.destroy();
    return;
  }
  const kind =
    error.code === 'HPE_HEADER_OVERFLOW' || error.code === 'HPE_CHUNK_EXTENSIONS_OVERFLOW'
      ? 'too_large'
      : error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? 'timeout'
        : 'bad_request';
  const { status, body } = dialect.refusal(kind);
  const payload = JSON.stringify(body);
  socket.write(
    `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: ${dialect.contentType}\r\n` +
      `Content-Length: ${Buffer.byteLength(payload)}\r\nConnection: close\r\n\r\n${payload}`,
  );
  lingerAndClose(socket);
}

/** Reading what a client still sends after its answer stops at this many bytes or this long. */
const LINGER_BYTES = 1024 * 1024;
const LINGER_MS = 2000;
const lingering = new WeakSet<Socket>();

/**
 * Node ends a `Connection: close` answer with socket.destroySoon(), which closes the socket while an
 * oversized body may still be arriving; a close with unread data is a reset, and a reset can discard
 * the answer before the client reads it. Every connection of the listener closes by lingering instead.
 */
function closeGracefully(fastify: FastifyInstance, event: 'connection' | 'secureConnection'): void {
  fastify.server.on(event, (socket: Socket) => {
    socket.destroySoon = lingeringDestroySoon;
  });
}

function lingeringDestroySoon(this: Socket): void {
  lingerAndClose(this);
}

/** Ends our side after the answer, then reads and drops what the client sends, bounded, and closes. */
function lingerAndClose(socket: Socket): void {
  if (lingering.has(socket)) return;
  lingering.add(socket);
  if (socket.writable) socket.end();
  let discarded = 0;
  const timer = setTimeout(() => socket.destroy(), LINGER_MS).unref();
  const closeWhenDone = () => {
    if (socket.readableEnded && socket.writableFinished) socket.destroy();
  };
  socket.on('data', (chunk: Buffer) => {
    discarded += chunk.length;
    if (discarded > LINGER_BYTES) socket.destroy();
  });
  socket.once('end', closeWhenDone);
  socket.once('finish', closeWhenDone);
  socket.once('close', () => clearTimeout(timer));
  socket.resume();
  closeWhenDone();
}
