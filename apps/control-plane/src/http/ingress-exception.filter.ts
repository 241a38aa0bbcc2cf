import { ArgumentsHost, Catch, ExceptionFilter, Injectable, Logger } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { RETRY_AFTER_SECONDS } from './admin-errors';
import { renderIngressError } from './ingress-errors';
import { ControlPlaneMetrics } from '../metrics/control-plane-metrics';

@Catch()
@Injectable()
export class IngressExceptionFilter implements ExceptionFilter {
  private readonly logger = new Logger('ingress');

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
    } else if (status >= 500) {
      this.logger.error({ msg: 'ingress request failed', error: String(error) });
    }
    const reply = http.getResponse<FastifyReply>();
    const retryAfter = body.retryAfterSeconds ?? (status === 503 ? RETRY_AFTER_SECONDS : undefined);
    if (retryAfter !== undefined) void reply.header('retry-after', String(retryAfter));
    void reply.status(status).type('application/json').send(body);
  }
}
