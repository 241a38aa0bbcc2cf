import { HttpException } from '@nestjs/common';
import { DomainError, RefusedError } from '@ql/domain';
import { IngressError, IngressErrorCode, ProtocolUnsupportedError } from '@ql/contracts';
import { fastifyErrorCode } from './fastify-error-code';

/** An ingress refusal decided at the edge (guard, hook), before any repository call. */
export class IngressRefusal extends Error {
  constructor(
    readonly status: number,
    readonly code: IngressErrorCode,
    message: string,
    /** A 429's `Retry-After` (whole seconds), also in the body. */
    readonly retryAfterSeconds?: number,
    /** Which rule refused, where a code has several (`csr_refused`). */
    readonly reason?: string,
  ) {
    super(message);
  }
}

/**
 * The status of each refusal a domain rule decides (`RefusedError`: the rule and its wire code live in
 * the domain, the status here). A token or certificate that is no good, or a disabled worker, is 403;
 * a token used up or a certificate superseded by another key is 409; secrets the attempt maps but
 * cannot get are 422.
 */
const REFUSED_STATUS: Partial<Record<IngressErrorCode, number>> = {
  enrollment_token_invalid: 403,
  enrollment_token_wrong_worker: 403,
  enrollment_token_used: 409,
  enrollment_token_exhausted: 409,
  enrollment_token_may_not_replace: 409,
  worker_disabled: 403,
  certificate_revoked: 403,
  certificate_unknown: 403,
  certificate_superseded: 409,
  secrets_unavailable: 422,
};

export interface RenderedError {
  readonly status: number;
  readonly body: IngressError;
}

/** One mapping from anything thrown on the ingress path to `{code, message, reason?}` (R-WIRE-3). */
export function renderIngressError(error: unknown): RenderedError {
  if (error instanceof IngressRefusal) {
    const { status, code, message, retryAfterSeconds, reason } = error;
    return {
      status,
      body: {
        code,
        message,
        ...(reason ? { reason } : {}),
        ...(retryAfterSeconds ? { retryAfterSeconds } : {}),
      },
    };
  }
  // ADR 0060: a worker this control plane cannot serve is told so with its own code, naming both sides.
  if (error instanceof ProtocolUnsupportedError)
    return { status: 400, body: { code: 'protocol_unsupported', message: error.message } };
  if (error instanceof DomainError) return renderDomainError(error);
  switch (fastifyErrorCode(error)) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return {
        status: 413,
        body: { code: 'worker_request_too_large', message: 'request body is over the route limit' },
      };
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return { status: 400, body: { code: 'invalid_worker_request', message: 'body must be a JSON object' } };
  }
  if (error instanceof SyntaxError) {
    return { status: 400, body: { code: 'invalid_worker_request', message: 'body is not valid JSON' } };
  }
  if (error instanceof HttpException && error.getStatus() === 404) {
    return { status: 404, body: { code: 'worker_route_not_found', message: 'no such ingress route' } };
  }
  return unexpected();
}

function unexpected(): RenderedError {
  return {
    status: 503,
    body: { code: 'worker_ingress_unavailable', message: 'the control plane cannot serve this now' },
  };
}

function renderDomainError(
  error: DomainError & { field?: string; rule?: string; reason?: string },
): RenderedError {
  switch (error.kind) {
    case 'validation':
      return { status: 400, body: { code: 'invalid_worker_request', message: error.message } };
    case 'fenced':
      return {
        status: 409,
        body: {
          code: (error as unknown as { code: IngressErrorCode }).code,
          message: error.message,
          reason: error.reason!,
        },
      };
    case 'conflict':
      return {
        status: 409,
        body: { code: 'worker_session_fenced', message: error.message, reason: error.reason! },
      };
    case 'not_found':
      return { status: 404, body: { code: 'worker_route_not_found', message: error.message } };
    case 'refused': {
      const { code, reason } = error as RefusedError;
      const status = REFUSED_STATUS[code as IngressErrorCode];
      // A code without a status is a rule the edge was not told of: a programming error, never a 4xx.
      if (status === undefined) return unexpected();
      return {
        status,
        body: { code: code as IngressErrorCode, message: error.message, ...(reason ? { reason } : {}) },
      };
    }
    case 'unavailable':
      // Which state, where the worker can tell them apart: migrations pending ends when an operator acts.
      return {
        status: 503,
        body: {
          code: 'worker_ingress_unavailable',
          message: error.message,
          ...(error.reason === 'migrations_pending' ? { reason: error.reason } : {}),
        },
      };
  }
}
