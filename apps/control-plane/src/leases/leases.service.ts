import { Inject, Injectable, Logger } from '@nestjs/common';
import {
  LEASE_REPOSITORY,
  LeaseRepository,
  WORKER_SESSION_REPOSITORY,
  WorkerSessionRepository,
  leaseTokenDigest,
  parseSessionId,
} from '@ql/domain';
import {
  EXECUTION_OFFER_SCHEMA,
  OfferResponse,
  RenewResponse,
  buildReleaseResponse,
  buildRenewResponse,
  parsePullRequest,
} from '@ql/contracts';
import { CONFIG } from '../core/core';
import { ControlPlaneConfig } from '../config/config';
import { PrincipalStanding } from '../identity/principal-standing';
import { SessionWireVersions } from '../identity/session-wire-versions';
import { WorkerPrincipal } from '../identity/worker-principal';
import { ControlPlaneMetrics } from '../metrics/control-plane-metrics';
import { LeaseFenceDto, PullRequestDto } from './dto/pull.dto';
import { leaseFenceCommand } from './lease-fence-command';
import { projectOffer } from './offer-projection';
import { OfferLongPoll } from './offer-long-poll';
import { OfferWaiters } from './offer-waiters';

/** Pull, renew and release for the calling worker's session (R-LSE-2..5). Tokens are digested here, never kept. */
@Injectable()
export class LeasesService {
  private readonly logger = new Logger('leases');
  private readonly longPoll: OfferLongPoll;

  constructor(
    @Inject(LEASE_REPOSITORY) private readonly leases: LeaseRepository,
    @Inject(WORKER_SESSION_REPOSITORY) sessions: WorkerSessionRepository,
    @Inject(CONFIG) private readonly config: ControlPlaneConfig,
    private readonly metrics: ControlPlaneMetrics,
    waiters: OfferWaiters,
    @Inject(PrincipalStanding) private readonly standing: Pick<PrincipalStanding, 'check'>,
    @Inject(SessionWireVersions) private readonly wire: Pick<SessionWireVersions, 'of' | 'software'>,
  ) {
    this.longPoll = new OfferLongPoll(leases, sessions, waiters, {
      maxWaitMs: config.offerWaitMaxMs,
      recheckMs: config.offerRecheckMs,
    });
  }

  /** `signal`: the client went away (a held pull stops waiting). */
  async offers(
    principal: WorkerPrincipal,
    sessionId: string,
    body: PullRequestDto,
    signal: AbortSignal = new AbortController().signal,
  ): Promise<OfferResponse> {
    const request = parsePullRequest(body);
    const session = parseSessionId(sessionId);
    const software = await this.wire.software(principal.workerId, session);
    const command = {
      workerId: principal.workerId,
      sessionId: session,
      fence: { generation: request.generation, expectedVersion: request.expectedVersion },
      offerId: request.offerId,
      tokenDigest: leaseTokenDigest(request.leaseToken),
      leaseMs: this.config.runLeaseMs,
      preferenceHoldMs: this.config.placementPreferenceHoldMs,
      software,
    };
    // A held pull claims again long after the guard ran: the certificate is checked before each claim.
    const result = await this.longPoll.pull(command, request.waitMs ?? 0, signal, () =>
      this.standing.check(principal),
    );
    if (result.kind === 'idle') {
      const { reason, activeLeases, capacity, scanned } = result;
      this.metrics.claim('idle', reason);
      return {
        schema: EXECUTION_OFFER_SCHEMA,
        status: 'idle',
        idle: { reason, activeLeases, capacity, scanned },
      };
    }
    this.metrics.claim(result.replayed ? 'replayed' : 'offered');
    const { run, attempt, lease } = result.offer;
    // Built only when debug logging is on: this is the hot path of every pull.
    if (Logger.isLevelEnabled('debug'))
      this.logger.debug({
        msg: result.replayed ? 'offer replayed' : 'offer claimed',
        workerId: principal.workerId,
        sessionId,
        runId: run.id,
        attemptId: attempt.id,
        leaseGeneration: lease.leaseGeneration,
      });
    return projectOffer(result.offer, software.wireVersion);
  }

  async renew(principal: WorkerPrincipal, sessionId: string, body: LeaseFenceDto): Promise<RenewResponse> {
    const renewed = await this.leases.renew(this.command(principal, sessionId, body));
    return buildRenewResponse(renewed.lease, renewed.cancelRequested);
  }

  async release(principal: WorkerPrincipal, sessionId: string, body: LeaseFenceDto) {
    return buildReleaseResponse(await this.leases.release(this.command(principal, sessionId, body)));
  }

  private command(principal: WorkerPrincipal, sessionId: string, body: LeaseFenceDto) {
    return { ...leaseFenceCommand(principal, sessionId, body), leaseMs: this.config.runLeaseMs };
  }
}
