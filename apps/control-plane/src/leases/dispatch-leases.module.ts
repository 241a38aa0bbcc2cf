import { Module } from '@nestjs/common';
import { IdentityModule } from '../identity/identity.module';
import { LeaseIngressController } from './lease-ingress.controller';
import { LeaseSweeperService } from './lease-sweeper.service';
import { LeasesService } from './leases.service';

/**
 * Dispatch leases on the ingress listener: offers (claim by pull, replay), renew, release, and the
 * bounded lease sweeper of this replica (R-LSE-1..6).
 */
@Module({
  imports: [IdentityModule],
  controllers: [LeaseIngressController],
  providers: [LeasesService, LeaseSweeperService],
})
export class DispatchLeasesModule {}
