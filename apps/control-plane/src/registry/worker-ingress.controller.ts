import { Body, Controller, HttpCode, Param, Post, UseGuards } from '@nestjs/common';
import { MtlsPrincipalGuard, Principal } from '../identity/mtls-principal.guard';
import { WorkerPrincipal } from '../identity/worker-principal';
import { LeasesService } from '../leases/leases.service';
import { RegistryService } from './registry.service';

/** R-WIRE-1 session actions; bodies never carry worker or session identity. */
@Controller('api/v3/worker-ingress/workers/:workerId/sessions/:sessionId')
@UseGuards(MtlsPrincipalGuard)
export class WorkerIngressController {
  constructor(
    private readonly registry: RegistryService,
    private readonly leases: LeasesService,
  ) {}

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

  @Post('offers')
  @HttpCode(200)
  offers(@Principal() p: WorkerPrincipal, @Param('sessionId') s: string, @Body() body: unknown) {
    return this.leases.offers(p, s, body);
  }

  @Post('renew')
  @HttpCode(200)
  renew(@Principal() p: WorkerPrincipal, @Param('sessionId') s: string, @Body() body: unknown) {
    return this.leases.renew(p, s, body);
  }

  @Post('release')
  @HttpCode(200)
  release(@Principal() p: WorkerPrincipal, @Param('sessionId') s: string, @Body() body: unknown) {
    return this.leases.release(p, s, body);
  }
}
