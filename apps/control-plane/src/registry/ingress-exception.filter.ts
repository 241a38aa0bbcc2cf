import { ArgumentsHost, Catch, ExceptionFilter, Logger } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import { renderIngressError } from '../http/ingress-errors';

@Catch()
export class IngressExceptionFilter implements ExceptionFilter {
  private readonly logger = new Logger('ingress');

  catch(error: unknown, host: ArgumentsHost): void {
    const { status, body } = renderIngressError(error);
    if (status >= 500) this.logger.error({ msg: 'ingress request failed', error: String(error) });
    void host.switchToHttp().getResponse<FastifyReply>().status(status).type('application/json').send(body);
  }
}
