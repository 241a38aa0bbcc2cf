import { DynamicModule, Global, Module } from '@nestjs/common';
import {
  API_KEY_REPOSITORY,
  AUDIT_REPOSITORY,
  CERTIFICATE_REVOCATION_REPOSITORY,
  CLOCK,
  CONSOLE_SESSION_REPOSITORY,
  ENROLLMENT_TOKEN_REPOSITORY,
  ID_GENERATOR,
  WORKER_SESSION_REPOSITORY,
  TASK_REPOSITORY,
  RUN_REPOSITORY,
  LEASE_REPOSITORY,
  ACTIVATION_REPOSITORY,
  WORKER_CERTIFICATE_REPOSITORY,
  SECRET_REPOSITORY,
  ENV_VAR_REPOSITORY,
  BUNDLE_REPOSITORY,
  PLANE_SECRET_KEY_REPOSITORY,
} from '@ql/domain';
import { ControlPlaneMetrics } from '../metrics/control-plane-metrics';
import { RunLogWaiters } from '../runs/run-log-waiters';
import { OfferWaiters } from '../leases/offer-waiters';
import { CONFIG, CORE, ControlPlaneCore } from './core';

/** Hands the one shared core to a Nest application; both listeners import it with the same instance. */
@Global()
@Module({})
export class CoreModule {
  static forCore(core: ControlPlaneCore): DynamicModule {
    const providers = [
      { provide: CORE, useValue: core },
      { provide: CONFIG, useValue: core.config },
      { provide: CLOCK, useValue: core.clock },
      { provide: ID_GENERATOR, useValue: core.ids },
      { provide: WORKER_SESSION_REPOSITORY, useValue: core.repositories.sessions },
      { provide: API_KEY_REPOSITORY, useValue: core.repositories.apiKeys },
      { provide: CONSOLE_SESSION_REPOSITORY, useValue: core.repositories.consoleSessions },
      { provide: AUDIT_REPOSITORY, useValue: core.repositories.audit },
      { provide: CERTIFICATE_REVOCATION_REPOSITORY, useValue: core.repositories.revocations },
      { provide: ENROLLMENT_TOKEN_REPOSITORY, useValue: core.repositories.enrollmentTokens },
      { provide: WORKER_CERTIFICATE_REPOSITORY, useValue: core.repositories.workerCertificates },
      { provide: TASK_REPOSITORY, useValue: core.repositories.tasks },
      { provide: RUN_REPOSITORY, useValue: core.repositories.runs },
      { provide: LEASE_REPOSITORY, useValue: core.repositories.leases },
      { provide: ACTIVATION_REPOSITORY, useValue: core.repositories.activation },
      { provide: SECRET_REPOSITORY, useValue: core.repositories.secrets },
      { provide: ENV_VAR_REPOSITORY, useValue: core.repositories.envVars },
      { provide: BUNDLE_REPOSITORY, useValue: core.repositories.bundles },
      { provide: PLANE_SECRET_KEY_REPOSITORY, useValue: core.repositories.planeSecretKeys },
      { provide: ControlPlaneMetrics, useValue: core.metrics },
      { provide: RunLogWaiters, useValue: core.logWaiters },
      { provide: OfferWaiters, useValue: core.offerWaiters },
    ];
    return { module: CoreModule, providers, exports: providers.map((p) => p.provide) };
  }
}
