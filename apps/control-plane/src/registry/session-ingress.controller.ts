import { Body, Controller, HttpCode, Param, Post, UseGuards } from '@nestjs/common';
import { INGRESS_SESSION_ROUTE } from '@ql/contracts';
import { MtlsPrincipalGuard, Principal } from '../identity/mtls-principal.guard';
import { WorkerPrincipal } from '../identity/worker-principal';
import { RegistryService } from './registry.service';

/** R-WIRE-1 session actions; bodies never carry worker or session identity. */
@Controller(INGRESS_SESSION_ROUTE)
@UseGuards(MtlsPrincipalGuard)
export class SessionIngressController {
  constructor(private readonly registry: RegistryService) {}

  @Post('register')
  @HttpCode(200)
  register(@Principal() p: WorkerPrincipal, @Param('sessionId') s: string, @Body() body: unknown) {
    return this.registry.register(p, s, body);
  }

  @Post('heartbeat')
  @HttpCode(200)
  heartbeat(@Principal() p: WorkerPrincipal, @Param('sessionId') s: string, @Body() body: unknown) {
    return this.registry.heartbeat(p, s, body);
  }

  @Post('drain')
  @HttpCode(200)
  drain(@Principal() p: WorkerPrincipal, @Param('sessionId') s: string, @Body() body: unknown) {
    return this.registry.drain(p, s, body);
  }

  @Post('offline')
  @HttpCode(200)
  offline(@Principal() p: WorkerPrincipal, @Param('sessionId') s: string, @Body() body: unknown) {
    return this.registry.offline(p, s, body);
  }
}
