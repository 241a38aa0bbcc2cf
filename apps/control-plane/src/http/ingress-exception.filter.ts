import { ArgumentsHost, Catch, ExceptionFilter, Injectable, Logger } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { RETRY_AFTER_SECONDS } from './admin-errors';
import { IngressRefusal, renderIngressError } from './ingress-errors';
import { ControlPlaneMetrics } from '../metrics/control-plane-metrics';

/** A state an operator ends (migrations pending, no issuer) is logged once a minute, not per call. */
const STATE_WARNING_EVERY_MS = 60_000;

@Catch()
@Injectable()
export class IngressExceptionFilter implements ExceptionFilter {
  private readonly logger = new Logger('ingress');
  /** When each state's warning was last logged, by code and reason. */
  private readonly warnedAt = new Map<string, number>();

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
    } else if (status >= 500 && (error instanceof IngressRefusal || body.reason === 'migrations_pending')) {
      this.warnState(`ingress calls refused (${status} ${body.code})`, body.code, body.reason, body.message);
    } else if (status >= 500) {
      this.logger.error({ msg: 'ingress request failed', error: String(error) });
    }
    const reply = http.getResponse<FastifyReply>();
    const retryAfter = body.retryAfterSeconds ?? (status === 503 ? RETRY_AFTER_SECONDS : undefined);
    if (retryAfter !== undefined) void reply.header('retry-after', String(retryAfter));
    void reply.status(status).type('application/json').send(body);
  }

  private warnState(msg: string, code: string, reason: string | undefined, detail: string): void {
    const key = `${code}/${reason ?? ''}`;
    const now = Date.now();
    if (now - (this.warnedAt.get(key) ?? -Infinity) < STATE_WARNING_EVERY_MS) return;
    this.warnedAt.set(key, now);
    this.logger.warn({ msg, code, ...(reason ? { reason } : {}), detail });
  }
}
