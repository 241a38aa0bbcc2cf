import { Module } from '@nestjs/common';
import type { WorkerConfig } from '../config/worker-config';
import { WORKER_LOG, WorkerLog } from '../logging/worker-log';
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
      inject: [WORKER_CONFIG, WORKER_LOG],
      useFactory: (c: WorkerConfig, log: WorkerLog) =>
        new WorkerJournal({
          dir: c.journalDir,
          workerId: c.workerId,
          maxRecords: c.journalMaxRecords,
          // The log stays valid as it was; the next compaction is tried once it grew again (ADR 0041).
          onCompactionError: (error) => log.warn('journal compaction failed', { error: String(error) }),
        }),
    },
  ],
  exports: [WorkerJournal],
})
export class JournalModule {}
