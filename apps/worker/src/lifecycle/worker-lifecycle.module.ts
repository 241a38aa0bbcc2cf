import { Module } from '@nestjs/common';
import { createIdGenerator } from '@ql/contracts';
import { ID_GENERATOR } from '@ql/domain';
import { systemHostProbe } from '../config/capabilities';
import { IngressClientModule } from '../ingress-client/ingress-client.module';
import { RunsModule } from '../runs/runs.module';
import type { WorkerConfig } from '../config/worker-config';
import { CertificateCalls, CertificateKeeper } from '../identity/certificate-keeper';
import type { FileCredentials } from '../ingress-client/file-credentials';
import { WORKER_LOG, WorkerLog } from '../logging/worker-log';
import {
  HOST_PROBE,
  WORKER_CERTIFICATE,
  WORKER_CONFIG,
  WORKER_CREDENTIALS,
  WORKER_INGRESS_CLIENT,
} from '../worker.tokens';
import { WorkerLifecycleService } from './worker-lifecycle.service';

/** The session lifecycle: register, heartbeat, drain, offline, fenced (R-WRK-1, -5, -6), driving the runs. */
@Module({
  imports: [IngressClientModule, RunsModule],
  providers: [
    { provide: ID_GENERATOR, useFactory: () => createIdGenerator() },
    { provide: HOST_PROBE, useValue: systemHostProbe },
    {
      provide: WORKER_CERTIFICATE,
      inject: [WORKER_CONFIG, WORKER_INGRESS_CLIENT, WORKER_CREDENTIALS, WORKER_LOG],
      useFactory: (c: WorkerConfig, client: CertificateCalls, credentials: FileCredentials, log: WorkerLog) =>
        new CertificateKeeper(c, client, () => credentials.recheck(), log),
    },
    WorkerLifecycleService,
  ],
  exports: [WorkerLifecycleService],
})
export class WorkerLifecycleModule {}
