import { Module } from '@nestjs/common';
import type { WorkerConfig } from '../config/worker-config';
import { WORKER_CONFIG } from '../worker.tokens';
import { WorkerJournal } from './worker-journal';

/**
 * The local journal of accepted runs (R-WRK-1, R-WRK-2). Building it touches no file: the folder
 * and its lock come with `WorkerJournal.open()`, which the lifecycle calls from `start()`.
 */
@Module({
  providers: [
    {
      provide: WorkerJournal,
      inject: [WORKER_CONFIG],
      useFactory: (c: WorkerConfig) =>
        new WorkerJournal({ dir: c.journalDir, workerId: c.workerId, maxRecords: c.journalMaxRecords }),
    },
  ],
  exports: [WorkerJournal],
})
export class JournalModule {}
