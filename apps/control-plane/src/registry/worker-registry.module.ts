import { Module } from '@nestjs/common';
import { IdentityModule } from '../identity/identity.module';
import { RegistryService } from './registry.service';
import { SessionIngressController } from './session-ingress.controller';

/** Worker sessions on the ingress listener: register, heartbeat, drain, offline (R-REG-3..6). */
@Module({
  imports: [IdentityModule],
  controllers: [SessionIngressController],
  providers: [RegistryService],
})
export class WorkerRegistryModule {}
