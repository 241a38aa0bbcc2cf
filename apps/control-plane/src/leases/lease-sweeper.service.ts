import { Inject, Injectable, Logger, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import {
  ACTIVATION_REPOSITORY,
  ActivationRepository,
  DeadlineSweepResult,
  LEASE_REPOSITORY,
  LeaseRepository,
  SweepResult,
} from '@ql/domain';
import { CONFIG, CORE, ControlPlaneCore } from '../core/core';
import { ControlPlaneConfig } from '../config/config';
import { SchedulerRegistry } from '@nestjs/schedule';
import { ScheduledLoop } from '@ql/scheduling';
import { ControlPlaneMetrics } from '../metrics/control-plane-metrics';

/**
 * R-LSE-6, R-RUN-6: a bounded sweeper, safe on N replicas (each item is re-checked under SKIP LOCKED):
 * expired leases, due retries and attempts past their deadline.
 */
@Injectable()
export class LeaseSweeperService implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger('sweeper');
  private readonly work: ScheduledLoop;

  constructor(
    @Inject(LEASE_REPOSITORY) private readonly leases: LeaseRepository,
    @Inject(ACTIVATION_REPOSITORY) private readonly activation: ActivationRepository,
    @Inject(CONFIG) private readonly config: ControlPlaneConfig,
    scheduler: SchedulerRegistry,
    private readonly metrics: ControlPlaneMetrics,
    @Inject(CORE) core: ControlPlaneCore,
  ) {
    this.work = new ScheduledLoop(
      scheduler,
      'sweeper',
      config.sweepIntervalMs,
      async () => (await core.migrations.ready()) && this.sweepOnce(),
      this.logger,
    );
  }

  onApplicationBootstrap(): void {
    this.work.start();
  }

  async onApplicationShutdown(): Promise<void> {
    await this.work.stop();
  }

  /** One cycle: fixed work (one page each of expired leases, due retries and passed deadlines). */
  async sweepOnce(): Promise<SweepResult & { deadlines: DeadlineSweepResult }> {
    const started = process.hrtime.bigint();
    const result = await this.leases.sweep(this.config.sweepPageSize);
    const deadlines = await this.activation.sweepDeadlines(
      this.config.sweepPageSize,
      this.config.runDeadlineGraceMs,
    );
    this.metrics.sweepCycle(result, Number(process.hrtime.bigint() - started) / 1e9, deadlines);
    if (Object.values(result).some((n) => n > 0)) this.logger.log({ msg: 'leases swept', ...result });
    if (Object.values(deadlines).some((n) => n > 0))
      this.logger.log({ msg: 'deadlines swept', ...deadlines });
    return { ...result, deadlines };
  }
}
