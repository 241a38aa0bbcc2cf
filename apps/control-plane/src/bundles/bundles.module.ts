import { Module } from '@nestjs/common';
import { IdentityModule } from '../identity/identity.module';
import { BundleIngressController } from './bundle-ingress.controller';
import { BundlesController } from './bundles.controllers';
import { BundlesService } from './bundles.service';

/** Script bundles on the admin listener: push, list, get, delete (issue 19 item 1, ADR 0051). */
@Module({
  controllers: [BundlesController],
  providers: [BundlesService],
})
export class BundlesAdminModule {}

/** The worker's fenced bundle fetch on the ingress listener (issue 19 item 3, ADR 0051). */
@Module({
  imports: [IdentityModule],
  controllers: [BundleIngressController],
})
export class BundlesIngressModule {}
