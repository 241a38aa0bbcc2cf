import { Module } from '@nestjs/common';
import { SchedulerRegistry } from '@nestjs/schedule';
import { createIdGenerator } from '@ql/contracts';
import type { WorkerConfig } from '../config/worker-config';
import { ExecutorModule } from '../executor/executor.module';
import { LocalProcessExecutor } from '../executor/local-process.executor';
import { JournalModule } from '../journal/journal.module';
import { WorkerJournal } from '../journal/worker-journal';
import { WORKER_LOG, WorkerLog } from '../logging/worker-log';
import { WORKER_CONFIG, WORKER_RUNS } from '../worker.tokens';
import { RunSupervisor } from './run-supervisor';

/**
 * The runs a worker executes: restart scan, pull loop, activation steps, log upload, renewal
 * (R-WRK-1..5). Building it starts nothing; the lifecycle drives it from `start()`.
 */
@Module({
  imports: [JournalModule, ExecutorModule],
  providers: [
    {
      provide: WORKER_RUNS,
      inject: [
        WORKER_CONFIG,
        WorkerJournal,
        LocalProcessExecutor,
        WORKER_LOG,
        { token: SchedulerRegistry, optional: true },
      ],
      useFactory: (
        config: WorkerConfig,
        journal: WorkerJournal,
        executor: LocalProcessExecutor,
        log: WorkerLog,
        scheduler?: SchedulerRegistry,
      ) => new RunSupervisor(config, journal, executor, log, createIdGenerator(), scheduler),
    },
  ],
  exports: [WORKER_RUNS],
})
export class RunsModule {}
