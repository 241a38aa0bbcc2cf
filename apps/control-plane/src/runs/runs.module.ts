import { Module } from '@nestjs/common';
import { BundleWorkdirs } from '../bundles/bundle-workdirs';
import { PlacementModule } from '../placement/placement.module';
import { CronTriggerService } from './cron-trigger.service';
import { RunsController, TasksController } from './runs.controllers';
import { RunsService } from './runs.service';
import { TaskBulkService } from './task-bulk.service';
import { TasksService } from './tasks.service';

/**
 * Tasks with immutable revisions, runs (trigger, list, detail with "why pending", cancel) and the
 * cron trigger loop, on the admin listener (R-RUN-1..3, R-PLC-3).
 */
@Module({
  imports: [PlacementModule],
  controllers: [TasksController, RunsController],
  providers: [TasksService, RunsService, TaskBulkService, CronTriggerService, BundleWorkdirs],
})
export class RunsModule {}
