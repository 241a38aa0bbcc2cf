import { ArgumentsHost, Catch, ExceptionFilter, HttpException, Logger } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import { DomainError } from '@ql/domain';
import { fastifyErrorCode } from './fastify-error-code';

export const ADMIN_ERROR_CODES = [
  'invalid_request',
  'authentication_required',
  'forbidden',
  'csrf_token_invalid',
  'not_found',
  'route_not_found',
  'conflict',
  'request_too_large',
  'unsupported_media_type',
  'unavailable',
  'internal_error',
] as const;
export type AdminErrorCode = (typeof ADMIN_ERROR_CODES)[number];

export class AdminRefusal extends Error {
  constructor(
    readonly status: number,
    readonly code: AdminErrorCode,
    message: string,
  ) {
    super(message);
  }
}

export interface Problem {
  readonly type: string;
  readonly title: string;
  readonly status: number;
  readonly code: AdminErrorCode;
  readonly detail: string;
  readonly reason?: string;
  readonly checks?: unknown;
}

const problem = (status: number, code: AdminErrorCode, detail: string, reason?: string): Problem => ({
  type: `urn:qinglong:problem:${code}`,
  title: code.replace(/_/g, ' '),
  status,
  code,
  detail,
  ...(reason ? { reason } : {}),
});

/** R-ADM-2: errors as application/problem+json with stable codes; one exhaustive mapping. */
export function renderAdminError(error: unknown): Problem {
  if (error instanceof AdminRefusal) return problem(error.status, error.code, error.message);
  if (error instanceof DomainError) {
    const reason = (error as { reason?: string }).reason;
    switch (error.kind) {
      case 'validation':
        return problem(400, 'invalid_request', error.message);
      case 'not_found':
        return problem(404, 'not_found', error.message);
      case 'fenced':
      case 'conflict':
        return problem(409, 'conflict', error.message, reason);
      case 'refused':
        return problem(403, 'forbidden', error.message, reason);
      case 'unavailable':
        return problem(503, 'unavailable', error.message, reason);
    }
  }
  const code = fastifyErrorCode(error);
  if (code === 'FST_ERR_CTP_BODY_TOO_LARGE')
    return problem(413, 'request_too_large', 'request body is too large');
  if (error instanceof SyntaxError || (typeof code === 'string' && code.startsWith('FST_ERR_CTP'))) {
    return problem(400, 'invalid_request', 'body must be a JSON object');
  }
  if (error instanceof HttpException && error.getStatus() === 404)
    return problem(404, 'route_not_found', 'no such route');
  if (error instanceof HttpException && error.getStatus() === 503) {
    // terminus reports a failed readiness check as 503 with the result of every check
    return { ...problem(503, 'unavailable', 'not ready'), checks: error.getResponse() };
  }
  if (error instanceof HttpException && error.getStatus() < 500) {
    return problem(error.getStatus(), 'invalid_request', error.message);
  }
  return problem(500, 'internal_error', 'unexpected error');
}

/** Seconds a client should wait before retrying a 503 on either listener (a database restart takes a few). */
export const RETRY_AFTER_SECONDS = 2;

@Catch()
export class AdminExceptionFilter implements ExceptionFilter {
  private readonly logger = new Logger('admin');

  catch(error: unknown, host: ArgumentsHost): void {
    const body = renderAdminError(error);
    if (body.status >= 500 && body.status !== 503)
      this.logger.error({ msg: 'admin request failed', error: String(error) });
    const reply = host.switchToHttp().getResponse<FastifyReply>();
    if (body.status === 503) void reply.header('retry-after', String(RETRY_AFTER_SECONDS));
    void reply.status(body.status).type('application/problem+json').send(body);
  }
}
