import { Module } from '@nestjs/common';
import { createIdGenerator } from '@ql/contracts';
import { ID_GENERATOR } from '@ql/domain';
import { systemHostProbe } from '../config/capabilities';
import { IngressClientModule } from '../ingress-client/ingress-client.module';
import { RunsModule } from '../runs/runs.module';
import { HOST_PROBE } from '../worker.tokens';
import { WorkerLifecycleService } from './worker-lifecycle.service';

/** The session lifecycle: register, heartbeat, drain, offline, fenced (R-WRK-1, -5, -6), driving the runs. */
@Module({
  imports: [IngressClientModule, RunsModule],
  providers: [
    { provide: ID_GENERATOR, useFactory: () => createIdGenerator() },
    { provide: HOST_PROBE, useValue: systemHostProbe },
    WorkerLifecycleService,
  ],
  exports: [WorkerLifecycleService],
})
export class WorkerLifecycleModule {}
