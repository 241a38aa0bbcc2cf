import { Inject, Injectable, Logger } from '@nestjs/common';
import {
  ACTIVATION_REPOSITORY,
  ActivationRepository,
  HeartbeatBatcher,
  WORKER_SESSION_REPOSITORY,
  WorkerSessionRepository,
  parseSessionId,
} from '@ql/domain';
import {
  HeartbeatResponse,
  MAX_HEARTBEAT_CANCELS,
  RegisterResponse,
  SessionResponse,
  buildHeartbeatResponse,
  buildRegisterResponse,
  buildSessionResponse,
  parseDrainRequest,
  parseHeartbeat,
  parseOfflineRequest,
  HEARTBEAT,
  parseRegistration,
  shapeAnswer,
  SUPPORTED_PROTOCOL_VERSIONS,
} from '@ql/contracts';
import { CONFIG } from '../core/core';
import { ControlPlaneConfig } from '../config/config';
import { CertificateForks } from '../identity/certificate-forks';
import { IngressRateLimit } from '../identity/ingress-rate-limit';
import { SessionWireVersions } from '../identity/session-wire-versions';
import { WorkerPrincipal } from '../identity/worker-principal';
import { ControlPlaneMetrics } from '../metrics/control-plane-metrics';
import { RegisterDto } from './dto/register.dto';
import { HeartbeatDto, SessionFenceDto } from './dto/session-fence.dto';

/**
 * Register, heartbeat, drain and offline for the calling worker's session (R-REG-3..6). Bodies
 * arrive as validated DTOs; the contracts' readers add the semantic rules (and check the shape again).
 */
@Injectable()
export class RegistryService {
  private readonly logger = new Logger('registry');
  private readonly heartbeats: HeartbeatBatcher;
  /** ADR 0060: the protocol versions a worker may register with here (`QL_PROTOCOL_MIN` and up). */
  private readonly served: readonly number[];

  constructor(
    @Inject(WORKER_SESSION_REPOSITORY) private readonly sessions: WorkerSessionRepository,
    @Inject(ACTIVATION_REPOSITORY) private readonly activation: ActivationRepository,
    @Inject(CONFIG) private readonly config: ControlPlaneConfig,
    private readonly metrics: ControlPlaneMetrics,
    private readonly rateLimit: IngressRateLimit,
    private readonly forks: CertificateForks,
    private readonly wire: SessionWireVersions,
  ) {
    this.served = SUPPORTED_PROTOCOL_VERSIONS.filter(
      (v) => v >= config.protocolMin && v <= config.protocolMax,
    );
    this.heartbeats = new HeartbeatBatcher(sessions, {
      windowMs: config.heartbeatBatchWindowMs,
      maxSize: config.heartbeatBatchMax,
      cancelLimit: MAX_HEARTBEAT_CANCELS,
    });
  }

  async register(
    principal: WorkerPrincipal,
    sessionId: string,
    body: RegisterDto,
  ): Promise<RegisterResponse> {
    const snapshot = parseRegistration(body, this.served);
    // A superseded certificate starts no session (ADR 0045 §4); the one it serves goes on.
    await this.forks.checkRegister(principal.workerId, principal.fingerprint256);
    const result = await this.sessions.register({
      workerId: principal.workerId,
      sessionId: parseSessionId(sessionId),
      snapshot,
      leaseMs: this.config.sessionLeaseMs,
      certificateFingerprint: principal.fingerprint256,
    });
    this.wire.remember(result.session.sessionId, snapshot.protocolVersion, snapshot.softwareVersion);
    // The rate limit sizes this worker's bucket from its slots (ADR 0042), from answers, not reads.
    this.rateLimit.learnSlots(principal.workerId, result.session.maxConcurrentRuns);
    if (result.outcome !== 'replayed') {
      const { workerId, sessionId: session, generation, version } = result.session;
      // Ids and counters only: never labels or certificate material (R-OPS-2).
      this.logger.log({
        msg: `worker session ${result.outcome}`,
        workerId,
        sessionId: session,
        generation,
        version,
      });
    }
    return buildRegisterResponse(result.outcome, result.session);
  }

  async heartbeat(
    principal: WorkerPrincipal,
    sessionId: string,
    body: HeartbeatDto,
  ): Promise<HeartbeatResponse> {
    const request = parseHeartbeat(body);
    // Coalesced with the replica's other heartbeats of the same few ms into one statement (ADR 0018).
    const { session, cancelAttemptIds } = await this.heartbeats.heartbeat({
      ...this.command(principal, sessionId, request),
      availableSlots: request.availableSlots,
      recoveryRequired: request.recoveryRequired ?? 0,
    });
    this.metrics.heartbeatAccepted();
    this.rateLimit.learnSlots(principal.workerId, session.maxConcurrentRuns);
    // The cancel intents came with the write; a replay (nothing written) reads them on the live-lease
    // index by (worker, session), only after the fence passed.
    const answer = buildHeartbeatResponse(
      session,
      cancelAttemptIds ??
        (await this.activation.cancelIntents(session.workerId, session.sessionId, MAX_HEARTBEAT_CANCELS)),
    );
    // ADR 0060: a v1 session learns of a cancel from renew's `cancelRequested`, as v1 did.
    return shapeAnswer(HEARTBEAT, await this.wire.of(session.workerId, session.sessionId), answer);
  }

  async drain(
    principal: WorkerPrincipal,
    sessionId: string,
    body: SessionFenceDto,
  ): Promise<SessionResponse> {
    return buildSessionResponse(
      await this.sessions.drain(this.command(principal, sessionId, parseDrainRequest(body))),
    );
  }

  async offline(
    principal: WorkerPrincipal,
    sessionId: string,
    body: SessionFenceDto,
  ): Promise<SessionResponse> {
    return buildSessionResponse(
      await this.sessions.offline(this.command(principal, sessionId, parseOfflineRequest(body))),
    );
  }

  private command(
    principal: WorkerPrincipal,
    sessionId: string,
    fence: { generation: number; expectedVersion: number },
  ) {
    return {
      workerId: principal.workerId,
      sessionId: parseSessionId(sessionId),
      fence: { generation: fence.generation, expectedVersion: fence.expectedVersion },
      leaseMs: this.config.sessionLeaseMs,
    };
  }
}
