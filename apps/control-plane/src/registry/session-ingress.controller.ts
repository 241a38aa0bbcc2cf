import { Body, Controller, HttpCode, Param, Post, UseGuards } from '@nestjs/common';
import { INGRESS_SESSION_ROUTE, SUPPORTED_PROTOCOL_RANGE } from '@ql/contracts';
import { IngressOperation, IngressController } from '../http/ingress-docs';
import { MtlsPrincipalGuard, Principal } from '../identity/mtls-principal.guard';
import { WorkerPrincipal } from '../identity/worker-principal';
import { RegisterDto } from './dto/register.dto';
import { HeartbeatDto, SessionFenceDto } from './dto/session-fence.dto';
import { HeartbeatResponseDto, RegisterResponseDto, SessionResponseDto } from './dto/session-response.dto';
import { RegistryService } from './registry.service';

const SESSION_FENCE = ['worker_session_fenced'] as const;

/** R-WIRE-1 session actions; bodies never carry worker or session identity. */
@Controller(INGRESS_SESSION_ROUTE)
@UseGuards(MtlsPrincipalGuard)
@IngressController()
export class SessionIngressController {
  constructor(private readonly registry: RegistryService) {}

  @Post('register')
  @HttpCode(200)
  @IngressOperation(
    'register',
    'Register a new session: generation 1, or a new generation that fences the previous session for ever',
    { type: RegisterResponseDto },
    SESSION_FENCE,
    [
      [
        400,
        ['invalid_worker_request', 'protocol_unsupported'],
        `the body breaks a rule (strict JSON, shape, limits, semantics); nothing was written. \`protocol_unsupported\`: a \`protocolVersion\` this control plane does not serve (it serves ${SUPPORTED_PROTOCOL_RANGE}); the message names both (ADR 0060)`,
      ],
    ],
  )
  register(@Principal() p: WorkerPrincipal, @Param('sessionId') s: string, @Body() body: RegisterDto) {
    return this.registry.register(p, s, body);
  }

  @Post('heartbeat')
  @HttpCode(200)
  @IngressOperation(
    'heartbeat',
    'Report available slots and extend the session lease; the answer names attempts to cancel',
    { type: HeartbeatResponseDto },
    SESSION_FENCE,
  )
  heartbeat(@Principal() p: WorkerPrincipal, @Param('sessionId') s: string, @Body() body: HeartbeatDto) {
    return this.registry.heartbeat(p, s, body);
  }

  @Post('drain')
  @HttpCode(200)
  @IngressOperation(
    'drain',
    'Drain: capacity 0, heartbeats go on, no new claims',
    { type: SessionResponseDto },
    SESSION_FENCE,
  )
  drain(@Principal() p: WorkerPrincipal, @Param('sessionId') s: string, @Body() body: SessionFenceDto) {
    return this.registry.drain(p, s, body);
  }

  @Post('offline')
  @HttpCode(200)
  @IngressOperation(
    'offline',
    'Go offline once local work is drained; the session accepts nothing after',
    { type: SessionResponseDto },
    SESSION_FENCE,
  )
  offline(@Principal() p: WorkerPrincipal, @Param('sessionId') s: string, @Body() body: SessionFenceDto) {
    return this.registry.offline(p, s, body);
  }
}
