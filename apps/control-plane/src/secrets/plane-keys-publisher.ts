import { Inject, Injectable, Logger, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import { SchedulerRegistry } from '@nestjs/schedule';
import { hostname } from 'node:os';
import { ID_GENERATOR, IdGenerator, PLANE_SECRET_KEY_REPOSITORY, PlaneSecretKeyRepository } from '@ql/domain';
import { ScheduledLoop } from '@ql/scheduling';
import { secretCipherOf } from '../config/secret-keys';
import { CONFIG, CORE, ControlPlaneCore } from '../core/core';
import { ControlPlaneConfig } from '../config/config';

/** How often a running plane refreshes its row; the CLI counts it running for three of these. */
export const PLANE_KEYS_REFRESH_MS = 5_000;

/**
 * Issue 29 item 5 (ADR 0050, amended): this plane's secret keys (ids and check values, never a key)
 * in `plane_secret_keys`, written before the listeners answer, refreshed on a timer and deleted at
 * stop, so `npm run secret -- set|rotate` can refuse a value no running plane could open. With the
 * sweeper off (`QL_SWEEP_INTERVAL_MS=0`, tests) the row is written at start only and counts until stop.
 */
@Injectable()
export class PlaneKeysPublisher implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger('secrets');
  private readonly replicaId: string;
  private readonly refreshMs: number;
  private readonly work: ScheduledLoop;

  constructor(
    @Inject(CONFIG) private readonly config: ControlPlaneConfig,
    @Inject(CORE) private readonly core: ControlPlaneCore,
    @Inject(ID_GENERATOR) ids: IdGenerator,
    @Inject(PLANE_SECRET_KEY_REPOSITORY) private readonly repository: PlaneSecretKeyRepository,
    scheduler: SchedulerRegistry,
  ) {
    this.replicaId = ids.uuidV7();
    this.refreshMs = config.sweepIntervalMs === 0 ? 0 : PLANE_KEYS_REFRESH_MS;
    this.work = new ScheduledLoop(scheduler, 'plane-keys', this.refreshMs, () => this.publish(), this.logger);
  }

  async onApplicationBootstrap(): Promise<void> {
    await this.publish();
    this.work.start();
  }

  async onApplicationShutdown(): Promise<void> {
    await this.work.stop();
    if (await this.core.migrations.ready())
      await this.repository.withdraw(this.replicaId).catch(() => undefined);
  }

  private async publish(): Promise<void> {
    // A replica on a database not migrated yet publishes once `npm run migrate` has run.
    if (!(await this.core.migrations.ready())) return;
    await this.repository.publish({
      replicaId: this.replicaId,
      process: `${hostname()} pid ${process.pid}`,
      keys: secretCipherOf(this.config)?.keyChecks() ?? {},
      refreshMs: this.refreshMs,
    });
  }
}
