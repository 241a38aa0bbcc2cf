import { Body, Controller, HttpCode, Param, Post, UseGuards } from '@nestjs/common';
import { INGRESS_SESSION_ROUTE } from '@ql/contracts';
import { IngressController, IngressOperation } from '../http/ingress-docs';
import { MtlsPrincipalGuard, Principal } from '../identity/mtls-principal.guard';
import { WorkerPrincipal } from '../identity/worker-principal';
import { ActivationService } from './activation.service';
import { ActivationResponseDto, LogAppendResponseDto } from './dto/activation-response.dto';
import { CompletionDto, LogChunkDto, RunningDto, StartFailureDto, StartingDto } from './dto/activation.dto';

const FENCES = ['worker_session_fenced', 'worker_lease_fenced'] as const;
const ACTIVATION = { type: ActivationResponseDto };

/** R-ACT-1..3, R-CMP-1..2, R-RUN-4: the lease holder's acknowledgements and output, under both fences. */
@Controller(INGRESS_SESSION_ROUTE)
@UseGuards(MtlsPrincipalGuard)
@IngressController()
export class ActivationIngressController {
  constructor(private readonly activation: ActivationService) {}

  @Post('starting')
  @HttpCode(200)
  @IngressOperation(
    'starting',
    'The attempt is being started: fixes its deadline (start + the task timeout)',
    ACTIVATION,
    FENCES,
  )
  starting(@Principal() p: WorkerPrincipal, @Param('sessionId') s: string, @Body() body: StartingDto) {
    return this.activation.starting(p, s, body);
  }

  @Post('running')
  @HttpCode(200)
  @IngressOperation(
    'running',
    'The attempt runs under `executorHandle`; needs `starting` first',
    ACTIVATION,
    FENCES,
  )
  running(@Principal() p: WorkerPrincipal, @Param('sessionId') s: string, @Body() body: RunningDto) {
    return this.activation.running(p, s, body);
  }

  @Post('start-failure')
  @HttpCode(200)
  @IngressOperation(
    'start-failure',
    'The attempt could not start: the lease ends, the run retries per its policy or fails',
    ACTIVATION,
    FENCES,
  )
  startFailure(
    @Principal() p: WorkerPrincipal,
    @Param('sessionId') s: string,
    @Body() body: StartFailureDto,
  ) {
    return this.activation.startFailure(p, s, body);
  }

  @Post('completion')
  @HttpCode(200)
  @IngressOperation(
    'completion',
    'The running attempt ended (with `executorHandle`: a starting one too, `running` applied first): the lease completes, the run finishes or retries; an exact replay changes nothing',
    ACTIVATION,
    FENCES,
  )
  completion(@Principal() p: WorkerPrincipal, @Param('sessionId') s: string, @Body() body: CompletionDto) {
    return this.activation.completion(p, s, body);
  }

  @Post('logs')
  @HttpCode(200)
  @IngressOperation(
    'logs',
    'One chunk of the attempt’s output, in sequence; past the run’s cap it is accepted and dropped',
    { type: LogAppendResponseDto },
    FENCES,
  )
  logs(@Principal() p: WorkerPrincipal, @Param('sessionId') s: string, @Body() body: LogChunkDto) {
    return this.activation.logs(p, s, body);
  }
}
