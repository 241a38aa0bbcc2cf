import { ArgumentsHost, Catch, ExceptionFilter, Injectable, Logger } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { RETRY_AFTER_SECONDS } from './admin-errors';
import { renderIngressError } from './ingress-errors';
import { ControlPlaneMetrics } from '../metrics/control-plane-metrics';

const MIGRATIONS_PENDING_LOG_MS = 60_000;

@Catch()
@Injectable()
export class IngressExceptionFilter implements ExceptionFilter {
  private readonly logger = new Logger('ingress');
  /** When "migrations pending" was last logged: once a minute, not once per worker call. */
  private migrationsPendingLoggedAt = -Infinity;

  constructor(private readonly metrics: ControlPlaneMetrics) {}

  catch(error: unknown, host: ArgumentsHost): void {
    const { status, body } = renderIngressError(error);
    const http = host.switchToHttp();
    if (status === 409) {
      this.metrics.fencedRefusal(body.code, body.reason);
      const params = (http.getRequest<FastifyRequest>().params ?? {}) as Record<string, string>;
      this.logger.warn({
        msg: 'ingress call fenced',
        workerId: params.workerId,
        sessionId: params.sessionId,
        reason: body.reason,
      });
    } else if (body.reason === 'migrations_pending') {
      const now = Date.now();
      if (now - this.migrationsPendingLoggedAt >= MIGRATIONS_PENDING_LOG_MS) {
        this.migrationsPendingLoggedAt = now;
        this.logger.warn({ msg: 'ingress calls refused: migrations pending (503)', detail: body.message });
      }
    } else if (status >= 500) {
      this.logger.error({ msg: 'ingress request failed', error: String(error) });
    }
    const reply = http.getResponse<FastifyReply>();
    const retryAfter = body.retryAfterSeconds ?? (status === 503 ? RETRY_AFTER_SECONDS : undefined);
    if (retryAfter !== undefined) void reply.header('retry-after', String(retryAfter));
    void reply.status(status).type('application/json').send(body);
  }
}
