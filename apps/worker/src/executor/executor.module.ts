import { Module } from '@nestjs/common';
import type { WorkerConfig } from '../config/worker-config';
import { workerCgroupFolder } from '../host/cgroup';
import { WORKER_CONFIG } from '../worker.tokens';
import { LocalProcessExecutor } from './local-process.executor';
import { resolveRunAs } from './run-as';

/**
 * The `local-process` executor (R-WRK-3). Building it starts nothing: folders, processes and
 * deadline timers come with `launch()`.
 */
@Module({
  providers: [
    {
      provide: LocalProcessExecutor,
      inject: [WORKER_CONFIG],
      useFactory: (c: WorkerConfig) =>
        new LocalProcessExecutor({
          workRoot: c.workDir,
          killGraceMs: c.killGraceMs,
          outputCapBytes: c.outputMaxBytes,
          reaperLingerMs: c.reaperLingerMs,
          cgroup: c.cgroup,
          cgroupFolder: workerCgroupFolder(c.workerId, c.journalDir),
          // Checked at start by main.ts (checkRunAs); resolving it again gives the same ids.
          runAs: c.runAs ? resolveRunAs(c.runAs) : undefined,
        }),
    },
  ],
  exports: [LocalProcessExecutor],
})
export class ExecutorModule {}
