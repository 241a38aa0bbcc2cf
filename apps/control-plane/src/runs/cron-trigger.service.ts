import { Inject, Injectable, Logger, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import {
  ConflictError,
  CLOCK,
  Clock,
  CronSchedule,
  ID_GENERATOR,
  IdGenerator,
  RUN_REPOSITORY,
  RunRepository,
  TASK_REPOSITORY,
  TaskRecord,
  TaskRepository,
  parseCron,
  previousFireTime,
} from '@ql/domain';
import { CONFIG, CORE, ControlPlaneCore } from '../core/core';
import { ControlPlaneConfig } from '../config/config';
import { SchedulerRegistry } from '@nestjs/schedule';
import { ScheduledLoop } from '@ql/scheduling';

const TASK_PAGE = 100;
/** Fixed work per tick: at most this many scheduled tasks are looked at. */
const MAX_TASKS_PER_TICK = 2_000;

/**
 * R-RUN-3: every replica ticks; a tick creates the run of the latest scheduled time of each cron task
 * (one missed time is caught up, never a storm), and the runs' unique (task, revision, time) key makes
 * it exactly one run across all replicas. Registered only in control-plane profiles.
 */
@Injectable()
export class CronTriggerService implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger('cron');
  private readonly work: ScheduledLoop;
  /** What this replica already fired, so a tick does not retry known times: `task:revision` → time. */
  private readonly fired = new Map<string, number>();
  /** `task:revision` of schedules this replica cannot parse, so each is logged once. */
  private readonly unparsable = new Set<string>();

  constructor(
    @Inject(TASK_REPOSITORY) private readonly tasks: TaskRepository,
    @Inject(RUN_REPOSITORY) private readonly runs: RunRepository,
    @Inject(ID_GENERATOR) private readonly ids: IdGenerator,
    @Inject(CLOCK) private readonly clock: Clock,
    @Inject(CONFIG) config: ControlPlaneConfig,
    scheduler: SchedulerRegistry,
    @Inject(CORE) core: ControlPlaneCore,
  ) {
    const tick = async () => (await core.migrations.ready()) && this.tick();
    this.work = new ScheduledLoop(scheduler, 'cron', config.cronTickMs, tick, this.logger);
  }

  onApplicationBootstrap(): void {
    this.work.start();
  }

  async onApplicationShutdown(): Promise<void> {
    await this.work.stop();
  }

  /** One tick at the clock's time; returns the runs this replica created. */
  async tick(): Promise<number> {
    const now = this.clock.now();
    let created = 0;
    let after: string | undefined;
    for (let seen = 0; seen < MAX_TASKS_PER_TICK; seen += TASK_PAGE) {
      const page = await this.tasks.listScheduled({ after, limit: TASK_PAGE });
      for (const task of page) if (await this.fire(task, now)) created++;
      if (page.length < TASK_PAGE) break;
      after = page[page.length - 1]!.id;
    }
    if (this.fired.size > 4 * MAX_TASKS_PER_TICK) this.fired.clear();
    return created;
  }

  /**
   * The task's schedule, or null when it does not parse on this replica (a zone this runtime's time
   * zone data lacks, on a replica older than the one that accepted it): that task is skipped, said
   * once per revision, and the others still fire.
   */
  private schedule(task: TaskRecord): CronSchedule | null {
    try {
      return parseCron(task.spec.cron, 'cron', task.spec.timezone);
    } catch (error) {
      const key = `${task.id}:${task.revision}`;
      if (!this.unparsable.has(key)) {
        if (this.unparsable.size > MAX_TASKS_PER_TICK) this.unparsable.clear();
        this.unparsable.add(key);
        const reason = error instanceof Error ? error.message : String(error);
        this.logger.warn({
          msg: 'cron task skipped: its schedule does not parse here',
          taskId: task.id,
          reason,
        });
      }
      return null;
    }
  }

  private async fire(task: TaskRecord, now: number): Promise<boolean> {
    const schedule = this.schedule(task);
    if (schedule === null) return false;
    const scheduledAt = previousFireTime(schedule, now);
    // Only times after this revision was made: an edit never fires a time from before it.
    if (scheduledAt === null || scheduledAt < task.updatedAt) return false;
    const key = `${task.id}:${task.revision}`;
    if (this.fired.get(key) === scheduledAt) return false;
    const result = await this.runs
      .trigger({
        runId: this.ids.uuidV7(),
        taskId: task.id,
        trigger: 'cron',
        scheduledAt,
        revision: task.revision,
      })
      .catch((error: unknown) => {
        // This task with the global env vars breaks a task limit (ADR 0061): said, and the others fire.
        if (!(error instanceof ConflictError && error.reason === 'env_vars_do_not_fit')) throw error;
        this.logger.warn({
          msg: 'cron run not created',
          taskId: task.id,
          scheduledAt,
          reason: error.message,
        });
        return null;
      });
    this.fired.set(key, scheduledAt);
    if (result?.created) {
      this.logger.log({ msg: 'cron run created', taskId: task.id, runId: result.run.id, scheduledAt });
      return true;
    }
    return false;
  }
}
