import { Module } from '@nestjs/common';
import { IdentityModule } from '../identity/identity.module';
import { PlaneKeysPublisher } from './plane-keys-publisher';
import { SecretDeliveryService } from './secret-delivery.service';
import { SecretsIngressController } from './secrets-ingress.controller';
import { SecretsController } from './secrets.controller';
import { SecretsService } from './secrets.service';

/** Secrets on the admin listener: create, replace, list, delete (ADR 0050). */
@Module({
  controllers: [SecretsController],
  providers: [SecretsService],
  exports: [SecretsService],
})
export class SecretsAdminModule {}

/**
 * Secrets on the ingress listener: `POST …/sessions/{sessionId}/secrets` for a lease holder, and the
 * keys it can open them with, published for the CLI (ADR 0050).
 */
@Module({
  imports: [IdentityModule],
  controllers: [SecretsIngressController],
  providers: [SecretDeliveryService, PlaneKeysPublisher],
})
export class SecretsIngressModule {}
