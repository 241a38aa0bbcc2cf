import { Module } from '@nestjs/common';
import { createIdGenerator } from '@ql/contracts';
import { ID_GENERATOR } from '@ql/domain';
import { systemHostProbe } from './config/capabilities';
import { WorkerConfig, loadWorkerConfig } from './config/worker-config';
import { fileCredentials } from './ingress-client/file-credentials';
import { WorkerIngressHttpsClient } from './ingress-client/worker-ingress-https.client';
import { WorkerLifecycleService } from './lifecycle/worker-lifecycle.service';
import { JsonLineLog, WORKER_LOG } from './logging/worker-log';
import { HOST_PROBE, WORKER_CONFIG, WORKER_INGRESS_CLIENT } from './worker.tokens';

/**
 * The headless worker as a Nest standalone application context: no HTTP server, no database.
 * Inert until `WorkerLifecycleService.start()` (R-PROF-3): every provider below only builds plain
 * objects — configuration is read from the environment, the HTTPS agent, timers, files and child
 * processes all come later, from `start()`.
 */
@Module({
  providers: [
    { provide: WORKER_CONFIG, useFactory: () => loadWorkerConfig(process.env) },
    {
      provide: WORKER_LOG,
      inject: [WORKER_CONFIG],
      useFactory: (c: WorkerConfig) => new JsonLineLog(c.logLevel),
    },
    { provide: ID_GENERATOR, useFactory: () => createIdGenerator() },
    { provide: HOST_PROBE, useValue: systemHostProbe },
    {
      provide: WORKER_INGRESS_CLIENT,
      inject: [WORKER_CONFIG],
      useFactory: (c: WorkerConfig) =>
        new WorkerIngressHttpsClient({
          origin: c.controlPlaneUrl,
          workerId: c.workerId,
          timeoutMs: c.requestTimeoutMs,
          credentials: fileCredentials({
            caPath: c.tlsCaPath,
            certPath: c.tlsCertPath,
            keyPath: c.tlsKeyPath,
          }),
        }),
    },
    WorkerLifecycleService,
  ],
  exports: [WorkerLifecycleService],
})
export class WorkerModule {}
