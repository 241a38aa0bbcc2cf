import { ArgumentsHost, Catch, ExceptionFilter, Injectable, Logger } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { PROTOCOL_VERSION_OF_WIRE, WireVersion, shapeRefusal } from '@ql/contracts';
import { SessionWireVersions } from '../identity/session-wire-versions';
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

  constructor(
    private readonly metrics: ControlPlaneMetrics,
    private readonly wire: SessionWireVersions,
  ) {}

  /** Async only for a refusal v1 did not have, from a session this replica does not remember. */
  async catch(error: unknown, host: ArgumentsHost): Promise<void> {
    // Logged and counted as decided; answered as the session's version has it.
    const { status, body } = renderIngressError(error);
    const http = host.switchToHttp();
    const answer = shapeRefusal(await this.versionOf(http.getRequest<FastifyRequest>(), body), body);
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
    void reply.status(status).type('application/json').send(answer);
  }

  /**
   * ADR 0062 §7: the wire version of the session the refused call comes from. A register says it in
   * its body; another call's session is remembered, or read, only when the refusal is one v1 did not
   * have (the rest are the same for every version). Unknown: the current version.
   */
  private async versionOf(
    request: FastifyRequest,
    body: { code: string; reason?: string },
  ): Promise<WireVersion> {
    if (shapeRefusal(1, body) === body) return 2;
    const params = (request.params ?? {}) as Record<string, string>;
    if (request.url.endsWith('/register')) {
      const offered = (request.body as { protocolVersion?: unknown } | undefined)?.protocolVersion;
      return offered === PROTOCOL_VERSION_OF_WIRE[1] ? 1 : 2;
    }
    if (!params.workerId || !params.sessionId) return 2;
    const known = this.wire.known(params.sessionId);
    if (known !== undefined) return known;
    try {
      return await this.wire.of(params.workerId, params.sessionId);
    } catch {
      return 2; // the database cannot say (migrations pending, unavailable): answered as it is
    }
  }

  private warnState(msg: string, code: string, reason: string | undefined, detail: string): void {
    const key = `${code}/${reason ?? ''}`;
    const now = Date.now();
    if (now - (this.warnedAt.get(key) ?? -Infinity) < STATE_WARNING_EVERY_MS) return;
    this.warnedAt.set(key, now);
    this.logger.warn({ msg, code, ...(reason ? { reason } : {}), detail });
  }
}
