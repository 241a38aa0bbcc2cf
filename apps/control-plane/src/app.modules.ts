import { DynamicModule, Module } from '@nestjs/common';
import { APP_FILTER, APP_GUARD, APP_PIPE } from '@nestjs/core';
import { ScheduleModule } from '@nestjs/schedule';
import { ActivationModule } from './activation/activation.module';
import { AdminModule } from './admin/admin.module';
import { ConsoleModule } from './console/console.module';
import { BundlesAdminModule, BundlesIngressModule } from './bundles/bundles.module';
import { ControlPlaneCore } from './core/core';
import { CoreModule } from './core/core.module';
import { EnrollmentAdminModule, EnrollmentIngressModule } from './enrollment/enrollment.module';
import { EnvVarsAdminModule } from './env-vars/env-vars.module';
import { HealthModule } from './health/health.module';
import { AdminExceptionFilter } from './http/admin-errors';
import { IngressExceptionFilter } from './http/ingress-exception.filter';
import { EdgeValidationPipe } from './http/validation/edge-validation.pipe';
import { ApiKeyGuard } from './identity/api-key.guard';
import { IdentityModule } from './identity/identity.module';
import { DispatchLeasesModule } from './leases/dispatch-leases.module';
import { MetricsModule } from './metrics/metrics.module';
import { WorkerRegistryModule } from './registry/worker-registry.module';
import { RunsModule } from './runs/runs.module';
import { SecretsAdminModule, SecretsIngressModule } from './secrets/secrets.module';

/**
 * The two listeners of the control plane compose the feature modules; each module's controllers
 * belong to one listener (docs/architecture.md has the map). Both listeners share one core
 * (database, repositories, readiness, metrics) and check every request body with the same DTO pipe,
 * after their guards (identity first), each answering in its own error shape. Scheduling
 * (@nestjs/schedule) is in both graphs because both carry a loop of the control-plane profiles: cron
 * (admin) and the lease sweeper (ingress); the worker profile never builds these graphs.
 */

/** The plain-HTTP listener: admin API (API keys), probes (no credentials) and metrics. */
@Module({})
export class AdminAppModule {
  static forCore(core: ControlPlaneCore): DynamicModule {
    return {
      module: AdminAppModule,
      imports: [
        CoreModule.forCore(core),
        ScheduleModule.forRoot(),
        IdentityModule,
        HealthModule,
        AdminModule,
        EnrollmentAdminModule,
        ConsoleModule,
        RunsModule,
        SecretsAdminModule,
        EnvVarsAdminModule,
        BundlesAdminModule,
        MetricsModule.forListener('admin'),
      ],
      providers: [
        { provide: APP_GUARD, useExisting: ApiKeyGuard },
        { provide: APP_FILTER, useClass: AdminExceptionFilter },
        { provide: APP_PIPE, useClass: EdgeValidationPipe },
      ],
    };
  }
}

/** The mTLS listener: worker ingress only (R-ID-1, R-WIRE-1). */
@Module({})
export class IngressAppModule {
  static forCore(core: ControlPlaneCore): DynamicModule {
    return {
      module: IngressAppModule,
      imports: [
        CoreModule.forCore(core),
        ScheduleModule.forRoot(),
        // The filter shapes a refusal for the session's wire version (ADR 0062 §7).
        IdentityModule,
        WorkerRegistryModule,
        DispatchLeasesModule,
        ActivationModule,
        EnrollmentIngressModule,
        SecretsIngressModule,
        BundlesIngressModule,
        MetricsModule.forListener('ingress'),
      ],
      providers: [
        { provide: APP_FILTER, useClass: IngressExceptionFilter },
        { provide: APP_PIPE, useClass: EdgeValidationPipe },
      ],
    };
  }
}
