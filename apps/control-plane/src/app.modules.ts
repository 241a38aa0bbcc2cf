import { DynamicModule, Module } from '@nestjs/common';
import { APP_FILTER, APP_GUARD } from '@nestjs/core';
import { ScheduleModule } from '@nestjs/schedule';
import { TerminusModule } from '@nestjs/terminus';
import {
  ApiKeysController,
  AuditController,
  CertificatesController,
  OpenApiController,
  WorkersController,
} from './admin/admin.controllers';
import { AdminService } from './admin/admin.service';
import { ControlPlaneCore } from './core/core';
import { CoreModule } from './core/core.module';
import { HealthController } from './health/health.controller';
import { MetricsModule } from './metrics/metrics.module';
import { AdminExceptionFilter } from './http/admin-errors';
import { ApiKeyGuard } from './identity/api-key.guard';
import { RevocationCache } from './identity/revocation-cache';
import { IngressExceptionFilter } from './registry/ingress-exception.filter';
import { RegistryService } from './registry/registry.service';
import { WorkerIngressController } from './registry/worker-ingress.controller';
import { CronTriggerService } from './background/cron-trigger.service';
import { LeaseSweeperService } from './background/lease-sweeper.service';
import { LeasesService } from './leases/leases.service';
import { RunsController, TasksController } from './runs/runs.controllers';
import { RunsService } from './runs/runs.service';
import { TasksService } from './runs/tasks.service';

/** The plain-HTTP listener: admin API (API keys) and probes (no credentials). */
@Module({})
export class AdminAppModule {
  static forCore(core: ControlPlaneCore): DynamicModule {
    return {
      module: AdminAppModule,
      imports: [
        CoreModule.forCore(core),
        TerminusModule.forRoot({ errorLogStyle: 'json', logger: false }),
        // The sweeper and cron loops live in the control plane profiles only (R-PROF-3).
        ScheduleModule.forRoot(),
        MetricsModule.forListener('admin'),
      ],
      controllers: [
        HealthController,
        OpenApiController,
        WorkersController,
        ApiKeysController,
        AuditController,
        CertificatesController,
        TasksController,
        RunsController,
      ],
      providers: [
        AdminService,
        TasksService,
        RunsService,
        // Background work of the control plane only (R-PROF-3): one sweeper and one cron ticker per replica.
        LeaseSweeperService,
        CronTriggerService,
        { provide: APP_GUARD, useClass: ApiKeyGuard },
        { provide: APP_FILTER, useClass: AdminExceptionFilter },
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
      imports: [CoreModule.forCore(core), MetricsModule.forListener('ingress')],
      controllers: [WorkerIngressController],
      providers: [
        RegistryService,
        LeasesService,
        RevocationCache,
        { provide: APP_FILTER, useClass: IngressExceptionFilter },
      ],
    };
  }
}
