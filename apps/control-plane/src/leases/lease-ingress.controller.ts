import { Body, Controller, HttpCode, Param, Post, UseGuards } from '@nestjs/common';
import { INGRESS_SESSION_ROUTE } from '@ql/contracts';
import { MtlsPrincipalGuard, Principal } from '../identity/mtls-principal.guard';
import { WorkerPrincipal } from '../identity/worker-principal';
import { LeasesService } from './leases.service';

/** R-LSE-2..5: pull an offer, renew and release a lease, for the calling worker's session. */
@Controller(INGRESS_SESSION_ROUTE)
@UseGuards(MtlsPrincipalGuard)
export class LeaseIngressController {
  constructor(private readonly leases: LeasesService) {}

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
