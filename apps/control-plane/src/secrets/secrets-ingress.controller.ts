import { Body, Controller, HttpCode, Param, Post, UseGuards } from '@nestjs/common';
import { ApiProperty } from '@nestjs/swagger';
import { INGRESS_SESSION_ROUTE, SecretsRequest, SecretsResponse } from '@ql/contracts';
import { IngressController, IngressOperation } from '../http/ingress-docs';
import { MtlsPrincipalGuard, Principal } from '../identity/mtls-principal.guard';
import { WorkerPrincipal } from '../identity/worker-principal';
import { LeaseFenceDto } from '../leases/dto/pull.dto';
import { UUID_V7_PROP } from '../http/view-props';
import { SecretDeliveryService } from './secret-delivery.service';

/** `secrets` body: the lease fence alone (as `starting`). */
export class SecretsRequestDto extends LeaseFenceDto implements SecretsRequest {}

export class SecretsResponseDto implements SecretsResponse {
  @ApiProperty(UUID_V7_PROP)
  readonly attemptId!: string;

  @ApiProperty({
    type: 'object',
    additionalProperties: { type: 'string' },
    description:
      'env name → value, as the attempt’s revision maps them (several secrets joined by the mapping’s `&` or line feed); empty when it maps none. For the child’s environment only: never journaled or logged',
  })
  readonly env!: Record<string, string>;
}

/** ADR 0050: the values an attempt's revision maps, for the holder of its live lease, after `starting`. */
@Controller(INGRESS_SESSION_ROUTE)
@UseGuards(MtlsPrincipalGuard)
@IngressController()
export class SecretsIngressController {
  constructor(private readonly delivery: SecretDeliveryService) {}

  @Post('secrets')
  @HttpCode(200)
  @IngressOperation(
    'secrets',
    'The secret values the attempt’s revision maps: only for the holder of the live lease (the renew fence) of an attempt that is `starting` or `running` and whose run has no cancel request; 422 `secrets_unavailable` when a mapped secret is gone or cannot be decrypted, or the run is being cancelled',
    { type: SecretsResponseDto },
    ['worker_session_fenced', 'worker_lease_fenced'],
    [
      [
        422,
        ['secrets_unavailable'],
        'a mapped secret is gone (`secret_missing`), secrets are off (`secrets_disabled`), a key is missing or wrong (`key_unknown`, `key_wrong`), the values are over 96 KiB (`secrets_too_large`) or the run has a cancel request (`cancel_requested`: the worker reports the start failure `cancel_requested`); nothing is served',
      ],
    ],
  )
  secrets(@Principal() p: WorkerPrincipal, @Param('sessionId') s: string, @Body() body: SecretsRequestDto) {
    return this.delivery.deliver(p, s, body);
  }
}
