import { Body, Controller, HttpCode, Param, Post, Res, UseGuards } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import { ApiExtraModels } from '@nestjs/swagger';
import { INGRESS_SESSION_ROUTE } from '@ql/contracts';
import { whileClientWaits } from '../http/client-gone';
import { IngressOperation, IngressController } from '../http/ingress-docs';
import { MtlsPrincipalGuard, Principal } from '../identity/mtls-principal.guard';
import { WorkerPrincipal } from '../identity/worker-principal';
import {
  ExecutionOfferDto,
  IdleOfferDto,
  OFFER_RESPONSE,
  ReleaseResponseDto,
  RenewResponseDto,
} from './dto/offer-response.dto';
import { LeaseFenceDto, PullRequestDto } from './dto/pull.dto';
import { LeasesService } from './leases.service';

const FENCES = ['worker_session_fenced', 'worker_lease_fenced'] as const;

/** R-LSE-2..5: pull an offer, renew and release a lease, for the calling worker's session. */
@Controller(INGRESS_SESSION_ROUTE)
@UseGuards(MtlsPrincipalGuard)
@IngressController()
@ApiExtraModels(ExecutionOfferDto, IdleOfferDto)
export class LeaseIngressController {
  constructor(private readonly leases: LeasesService) {}

  @Post('offers')
  @HttpCode(200)
  @IngressOperation(
    'offers',
    'Pull: claim at most one queued attempt this session can run, or replay the offer of the same offerId and token; with waitMs, a pull that finds nothing claimable is held until a run is queued for it or the wait ends (long poll)',
    OFFER_RESPONSE,
    FENCES,
  )
  offers(
    @Principal() p: WorkerPrincipal,
    @Param('sessionId') s: string,
    @Body() body: PullRequestDto,
    @Res({ passthrough: true }) reply: FastifyReply,
  ) {
    return whileClientWaits(reply, (gone) => this.leases.offers(p, s, body, gone));
  }

  @Post('renew')
  @HttpCode(200)
  @IngressOperation(
    'renew',
    'Renew the lease inside its term: its version + 1 and a new expiry',
    { type: RenewResponseDto },
    FENCES,
  )
  renew(@Principal() p: WorkerPrincipal, @Param('sessionId') s: string, @Body() body: LeaseFenceDto) {
    return this.leases.renew(p, s, body);
  }

  @Post('release')
  @HttpCode(200)
  @IngressOperation(
    'release',
    'Release the lease before the attempt started: the attempt goes back to the queue',
    { type: ReleaseResponseDto },
    FENCES,
  )
  release(@Principal() p: WorkerPrincipal, @Param('sessionId') s: string, @Body() body: LeaseFenceDto) {
    return this.leases.release(p, s, body);
  }
}
