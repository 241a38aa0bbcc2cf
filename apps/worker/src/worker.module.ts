import { DynamicModule, Module } from '@nestjs/common';
import { ScheduleModule } from '@nestjs/schedule';
import { WorkerConfigModule } from './config/worker-config.module';
import { ExecutorModule } from './executor/executor.module';
import { IngressClientModule } from './ingress-client/ingress-client.module';
import { JournalModule } from './journal/journal.module';
import { WorkerLifecycleModule } from './lifecycle/worker-lifecycle.module';

/**
 * The headless worker as a Nest standalone application context: no HTTP server, no database.
 * Inert until `WorkerLifecycleService.start()` (R-PROF-3): every provider only builds plain objects —
 * the HTTPS agent, timers, the journal's folder and lock, work folders and child processes all come
 * later, from `start()`, `WorkerJournal.open()` and `LocalProcessExecutor.launch()`. Scheduling
 * (@nestjs/schedule) is part of the graph only for the `worker` profile: `WorkerModule` alone cannot
 * start, `WorkerModule.forProfile('worker')` can.
 */
@Module({
  imports: [WorkerConfigModule, IngressClientModule, JournalModule, ExecutorModule, WorkerLifecycleModule],
  exports: [WorkerLifecycleModule, JournalModule, ExecutorModule],
})
export class WorkerModule {
  static forProfile(profile: string | undefined): DynamicModule {
    return {
      module: WorkerModule,
      imports: profile === 'worker' ? [ScheduleModule.forRoot()] : [],
    };
  }
}
