import { ArgumentsHost, Catch, ExceptionFilter, Logger } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { renderIngressError } from '../http/ingress-errors';

@Catch()
export class IngressExceptionFilter implements ExceptionFilter {
  private readonly logger = new Logger('ingress');

  catch(error: unknown, host: ArgumentsHost): void {
    const { status, body } = renderIngressError(error);
    const http = host.switchToHttp();
    if (status === 409) {
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
    void http.getResponse<FastifyReply>().status(status).type('application/json').send(body);
  }
}
