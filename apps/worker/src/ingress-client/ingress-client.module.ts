import { Module } from '@nestjs/common';
import { WorkerConfig } from '../config/worker-config';
import { WORKER_LOG, WorkerLog } from '../logging/worker-log';
import { WORKER_CONFIG, WORKER_CREDENTIALS, WORKER_INGRESS_CLIENT } from '../worker.tokens';
import { FileCredentials, fileCredentials } from './file-credentials';
import { WorkerIngressHttpsClient } from './worker-ingress-https.client';

/**
 * The one shared `WorkerIngressHttpsClient` (R-WIRE-4) over every configured control-plane origin
 * (R-WRK-7). Building it opens nothing: an origin's agent and socket come with its first call.
 */
@Module({
  providers: [
    {
      provide: WORKER_CREDENTIALS,
      inject: [WORKER_CONFIG],
      useFactory: (c: WorkerConfig) =>
        fileCredentials({ caPath: c.tlsCaPath, certPath: c.tlsCertPath, keyPath: c.tlsKeyPath }),
    },
    {
      provide: WORKER_INGRESS_CLIENT,
      inject: [WORKER_CONFIG, WORKER_LOG, WORKER_CREDENTIALS],
      useFactory: (c: WorkerConfig, log: WorkerLog, credentials: FileCredentials) =>
        new WorkerIngressHttpsClient({
          origins: c.controlPlaneOrigins,
          workerId: c.workerId,
          timeoutMs: c.requestTimeoutMs,
          credentials,
          // Once per change of origin, not per call (issue 16 item 11).
          onOriginChange: (change) => log.warn('control plane origin changed', { ...change }),
        }),
    },
  ],
  exports: [WORKER_INGRESS_CLIENT, WORKER_CREDENTIALS],
})
export class IngressClientModule {}
