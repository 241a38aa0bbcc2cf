import { Module } from '@nestjs/common';
import { IdentityModule } from '../identity/identity.module';
import { ActivationIngressController } from './activation-ingress.controller';
import { ActivationService } from './activation.service';

/**
 * Activation, completion and logs on the ingress listener (R-ACT-1..3, R-CMP-1..2, R-RUN-4):
 * `starting`, `running`, `start-failure`, `completion`, `logs`.
 */
@Module({
  imports: [IdentityModule],
  controllers: [ActivationIngressController],
  providers: [ActivationService],
})
export class ActivationModule {}
