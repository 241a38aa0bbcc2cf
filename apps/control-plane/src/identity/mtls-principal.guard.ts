import { CanActivate, ExecutionContext, Inject, Injectable, createParamDecorator } from '@nestjs/common';
import type { TLSSocket } from 'node:tls';
import type { FastifyRequest } from 'fastify';
import { INGRESS_ACTIONS, IngressAction } from '@ql/contracts';
import { CONFIG } from '../core/core';
import { ControlPlaneConfig } from '../config/config';
import { IngressRefusal } from '../http/ingress-errors';
import { ControlPlaneMetrics } from '../metrics/control-plane-metrics';
import { IngressRateLimit, retryAfterSeconds } from './ingress-rate-limit';
import { PrincipalStanding } from './principal-standing';
import { WorkerPrincipal, principalFromCertificate } from './worker-principal';

type IngressRequest = FastifyRequest & { principal?: WorkerPrincipal };

/** Parsing a certificate costs more than a request; a TLS connection keeps its peer for its lifetime. */
const principals = new WeakMap<TLSSocket, WorkerPrincipal | null>();

/**
 * R-ID-2/R-ID-3: the principal comes from the verified peer certificate on every request, before any
 * repository call; the path's worker id must be the principal's. Then the per-worker rate limit, the
 * certificate's validity at this request and the certificate revocation list (`PrincipalStanding`).
 * Nest makes one guard per module that uses it, so the limit is not the guard's own: it is the identity
 * module's one `IngressRateLimit`, one bucket per worker across every route (ADR 0042).
 */
@Injectable()
export class MtlsPrincipalGuard implements CanActivate {
  constructor(
    @Inject(CONFIG) private readonly config: ControlPlaneConfig,
    private readonly standing: PrincipalStanding,
    private readonly rateLimit: IngressRateLimit,
    private readonly metrics: ControlPlaneMetrics,
  ) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    const request = context.switchToHttp().getRequest<IngressRequest>();
    const principal = this.principalOf(request.raw.socket as TLSSocket);
    if (!principal) {
      throw new IngressRefusal(
        401,
        'worker_authentication_required',
        'a valid worker client certificate is required',
      );
    }
    const params = request.params as { workerId?: string };
    if (params.workerId !== principal.workerId) {
      throw new IngressRefusal(
        401,
        'worker_authentication_required',
        'the certificate does not speak for this worker',
      );
    }
    const waitMs = this.rateLimit.take(principal.workerId);
    if (waitMs > 0) {
      const seconds = retryAfterSeconds(waitMs);
      this.metrics.rateLimited(actionOf(request));
      throw new IngressRefusal(
        429,
        'worker_rate_limited',
        `too many requests from this worker; retry after ${seconds} s`,
        seconds,
      );
    }
    // Identity is settled above without the database; validity is checked now, on this request (the
    // principal is cached per connection, which may outlive notAfter); revocation is the first lookup.
    await this.standing.check(principal);
    request.principal = principal;
    return true;
  }

  private principalOf(socket: TLSSocket): WorkerPrincipal | null {
    if (!socket || typeof socket.getPeerX509Certificate !== 'function' || !socket.authorized) return null;
    if (principals.has(socket)) return principals.get(socket)!;
    // Resumed sessions can report no peer certificate: that is a refusal, never an anonymous pass.
    const cert = socket.getPeerX509Certificate();
    const principal = cert ? principalFromCertificate(cert, this.config.trustDomain) : null;
    if (cert) principals.set(socket, principal);
    return principal;
  }
}

/** The ingress action of a matched route (its last path segment): a bounded metric label. */
function actionOf(request: FastifyRequest): IngressAction | 'unknown' {
  const action = request.routeOptions.url?.slice(request.routeOptions.url.lastIndexOf('/') + 1);
  return (INGRESS_ACTIONS as readonly string[]).includes(action ?? '')
    ? (action as IngressAction)
    : 'unknown';
}

export const Principal = createParamDecorator(
  (_data: unknown, context: ExecutionContext): WorkerPrincipal =>
    context.switchToHttp().getRequest<IngressRequest>().principal!,
);
