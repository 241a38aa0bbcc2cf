import { Inject, Injectable } from '@nestjs/common';
import {
  ACTIVATION_REPOSITORY,
  ActivationRepository,
  ActivationResult,
  LogAppendResult,
  readCompletion,
  readErrorCode,
  readExecutorHandle,
  readFinalLogs,
  readLogChunk,
} from '@ql/domain';
import { RunActivationResponse } from '@ql/contracts';
import { WorkerPrincipal } from '../identity/worker-principal';
import { leaseFenceCommand } from '../leases/lease-fence-command';
import { LeaseFenceDto } from '../leases/dto/pull.dto';
import { CompletionDto, LogChunkDto, RunningDto, StartFailureDto } from './dto/activation.dto';
import { RunLogWaiters } from '../runs/run-log-waiters';
import { projectActivation } from './activation-projection';
import { CONFIG } from '../core/core';
import { ControlPlaneConfig } from '../config/config';

/**
 * The lease holder's acknowledgements and output (R-ACT-1..3, R-CMP-1..2, R-RUN-4). The domain's
 * readers check each body again behind the DTO (ADR 0009); the fence is the renew/release one.
 */
@Injectable()
export class ActivationService {
  constructor(
    @Inject(ACTIVATION_REPOSITORY) private readonly activation: ActivationRepository,
    private readonly logWaiters: RunLogWaiters,
    @Inject(CONFIG) private readonly config: ControlPlaneConfig,
  ) {}

  private project(result: ActivationResult): RunActivationResponse {
    return projectActivation(result, this.config.runDeadlineGraceMs);
  }

  async starting(p: WorkerPrincipal, sessionId: string, body: LeaseFenceDto): Promise<RunActivationResponse> {
    return this.project(await this.activation.starting(leaseFenceCommand(p, sessionId, body)));
  }

  async running(p: WorkerPrincipal, sessionId: string, body: RunningDto): Promise<RunActivationResponse> {
    const { executorHandle, ...fence } = body;
    const command = {
      ...leaseFenceCommand(p, sessionId, fence),
      executorHandle: readExecutorHandle(executorHandle),
    };
    return this.project(await this.activation.running(command));
  }

  async startFailure(
    p: WorkerPrincipal,
    sessionId: string,
    body: StartFailureDto,
  ): Promise<RunActivationResponse> {
    const { errorCode, ...fence } = body;
    const command = { ...leaseFenceCommand(p, sessionId, fence), errorCode: readErrorCode(errorCode) };
    return this.project(await this.activation.startFailure(command));
  }

  async completion(
    p: WorkerPrincipal,
    sessionId: string,
    body: CompletionDto,
  ): Promise<RunActivationResponse> {
    const { outcome, exitCode, errorSummary, finalLogs, ...fence } = body;
    const { step: _step, ...ending } = readCompletion({ outcome, exitCode, errorSummary });
    const result = await this.activation.complete({
      ...leaseFenceCommand(p, sessionId, fence),
      ...ending,
      finalLogs: readFinalLogs(finalLogs),
    });
    const response = this.project(result);
    this.logWaiters.notify(response.snapshot.runId);
    return response;
  }

  async logs(p: WorkerPrincipal, sessionId: string, body: LogChunkDto): Promise<LogAppendResult> {
    const { seq, stream, text, ...fence } = body;
    const { runId, ...answer } = await this.activation.appendLog({
      ...leaseFenceCommand(p, sessionId, fence),
      ...readLogChunk({ seq, stream, text }),
    });
    this.logWaiters.notify(runId);
    return answer;
  }
}
