import { Module } from '@nestjs/common';
import { BUNDLE_REPOSITORY } from '@ql/domain';
import { SqlBundleRepository } from '@ql/persistence';
import { CORE, ControlPlaneCore } from '../core/core';
import { IdentityModule } from '../identity/identity.module';
import { BundleIngressController } from './bundle-ingress.controller';
import { BundlesController } from './bundles.controllers';
import { BundlesService } from './bundles.service';

/** The bundle store, for the modules that read it (the task writes check `workdir` against it). */
export const bundleRepositoryProvider = {
  provide: BUNDLE_REPOSITORY,
  inject: [CORE],
  useFactory: (core: ControlPlaneCore) => new SqlBundleRepository(core.db, core.ids),
};

/** Script bundles on the admin listener: push, list, get, delete (issue 19 item 1, ADR 0051). */
@Module({
  controllers: [BundlesController],
  providers: [bundleRepositoryProvider, BundlesService],
})
export class BundlesAdminModule {}

/** The worker's fenced bundle fetch on the ingress listener (issue 19 item 3, ADR 0051). */
@Module({
  imports: [IdentityModule],
  controllers: [BundleIngressController],
  providers: [bundleRepositoryProvider],
})
export class BundlesIngressModule {}
