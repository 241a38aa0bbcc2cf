import { Global, Module } from '@nestjs/common';
import { WORKER_LOG, JsonLineLog } from '../logging/worker-log';
import { WORKER_CONFIG } from '../worker.tokens';
import { WorkerConfig, loadWorkerConfig } from './worker-config';

/** The worker's settings and its log, read once; every worker module may inject them. */
@Global()
@Module({
  providers: [
    { provide: WORKER_CONFIG, useFactory: () => loadWorkerConfig(process.env) },
    {
      provide: WORKER_LOG,
      inject: [WORKER_CONFIG],
      useFactory: (c: WorkerConfig) => new JsonLineLog(c.logLevel),
    },
  ],
  exports: [WORKER_CONFIG, WORKER_LOG],
})
export class WorkerConfigModule {}
