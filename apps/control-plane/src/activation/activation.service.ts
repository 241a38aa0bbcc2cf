import { Inject, Injectable } from '@nestjs/common';
import { ACTIVATION_REPOSITORY, ActivationRepository, ActivationResult, LogAppendResult } from '@ql/domain';
import {
  COMPLETION,
  RunActivationResponse,
  shapeAnswer,
  parseCompletionRequest,
  parseLogsRequest,
  parseRunningRequest,
  parseStartFailureRequest,
} from '@ql/contracts';
import { SessionWireVersions } from '../identity/session-wire-versions';
import { WorkerPrincipal } from '../identity/worker-principal';
import { leaseFenceCommand } from '../leases/lease-fence-command';
import { LeaseFenceDto } from '../leases/dto/pull.dto';
import { CompletionDto, LogChunkDto, RunningDto, StartFailureDto } from './dto/activation.dto';
import { RunLogWaiters } from '../runs/run-log-waiters';
import { projectActivation } from './activation-projection';
import { CONFIG } from '../core/core';
import { ControlPlaneConfig } from '../config/config';

/**
 * The lease holder's acknowledgements and output (R-ACT-1..3, R-CMP-1..2, R-RUN-4). Each call's
 * contract reader (`@ql/contracts`, `ingress/<call>.ts`) checks the body again behind the DTO
 * (ADR 0009); the fence is the renew/release one.
 */
@Injectable()
export class ActivationService {
  constructor(
    @Inject(ACTIVATION_REPOSITORY) private readonly activation: ActivationRepository,
    private readonly logWaiters: RunLogWaiters,
    @Inject(CONFIG) private readonly config: ControlPlaneConfig,
    private readonly wire: SessionWireVersions,
  ) {}

  /** The answer for the calling session's wire version (ADR 0060): v1 has no `deadlineGraceMs`. */
  private async project(
    p: WorkerPrincipal,
    sessionId: string,
    result: ActivationResult,
  ): Promise<RunActivationResponse> {
    const version = await this.wire.of(p.workerId, sessionId);
    // The four activation calls answer alike: COMPLETION's descriptor holds the answer's versions.
    return shapeAnswer(COMPLETION, version, projectActivation(result, this.config.runDeadlineGraceMs));
  }

  async starting(p: WorkerPrincipal, sessionId: string, body: LeaseFenceDto): Promise<RunActivationResponse> {
    return this.project(p, sessionId, await this.activation.starting(leaseFenceCommand(p, sessionId, body)));
  }

  async running(p: WorkerPrincipal, sessionId: string, body: RunningDto): Promise<RunActivationResponse> {
    const { executorHandle, ...fence } = parseRunningRequest(body);
    const command = { ...leaseFenceCommand(p, sessionId, fence), executorHandle };
    return this.project(p, sessionId, await this.activation.running(command));
  }

  async startFailure(
    p: WorkerPrincipal,
    sessionId: string,
    body: StartFailureDto,
  ): Promise<RunActivationResponse> {
    const { errorCode, ...fence } = parseStartFailureRequest(body);
    const command = { ...leaseFenceCommand(p, sessionId, fence), errorCode };
    return this.project(p, sessionId, await this.activation.startFailure(command));
  }

  async completion(
    p: WorkerPrincipal,
    sessionId: string,
    body: CompletionDto,
  ): Promise<RunActivationResponse> {
    const { outcome, exitCode, errorSummary, executorHandle, finalLogs, ...fence } =
      parseCompletionRequest(body);
    const result = await this.activation.complete({
      ...leaseFenceCommand(p, sessionId, fence),
      outcome,
      exitCode,
      errorSummary,
      // ADR 0047: the worker sent no `running`; this completion stands in for it.
      ...(executorHandle === undefined ? {} : { executorHandle }),
      finalLogs,
    });
    const response = await this.project(p, sessionId, result);
    this.logWaiters.notify(response.snapshot.runId);
    return response;
  }

  async logs(p: WorkerPrincipal, sessionId: string, body: LogChunkDto): Promise<LogAppendResult> {
    const { seq, stream, text, ...fence } = parseLogsRequest(body);
    const { runId, ...answer } = await this.activation.appendLog({
      ...leaseFenceCommand(p, sessionId, fence),
      seq,
      stream,
      text,
    });
    this.logWaiters.notify(runId);
    return answer;
  }
}
