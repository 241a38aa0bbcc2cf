import { Module } from '@nestjs/common';
import { WorkerConfig } from '../config/worker-config';
import { WORKER_CONFIG, WORKER_INGRESS_CLIENT } from '../worker.tokens';
import { fileCredentials } from './file-credentials';
import { WorkerIngressHttpsClient } from './worker-ingress-https.client';

/**
 * The one shared `WorkerIngressHttpsClient` (R-WIRE-4). Building it opens nothing: the agent and its
 * socket come with the first call.
 */
@Module({
  providers: [
    {
      provide: WORKER_INGRESS_CLIENT,
      inject: [WORKER_CONFIG],
      useFactory: (c: WorkerConfig) =>
        new WorkerIngressHttpsClient({
          origins: c.controlPlaneOrigins,
          workerId: c.workerId,
          timeoutMs: c.requestTimeoutMs,
          credentials: fileCredentials({
            caPath: c.tlsCaPath,
            certPath: c.tlsCertPath,
            keyPath: c.tlsKeyPath,
          }),
        }),
    },
  ],
  exports: [WORKER_INGRESS_CLIENT],
})
export class IngressClientModule {}
