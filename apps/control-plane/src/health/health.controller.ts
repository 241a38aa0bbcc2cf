import { Controller, Get, Inject } from '@nestjs/common';
import { ApiOperation, ApiTags } from '@nestjs/swagger';
import { HealthCheck, HealthCheckService, HealthIndicatorService } from '@nestjs/terminus';
import { CORE, ControlPlaneCore } from '../core/core';
import { PROBES_TAG } from '../http/admin-docs';
import { RequireRole } from '../identity/api-key.guard';

/** Probes need no credentials (R-ID-5); `/readyz` is 503 until started and while stopping (R-OPS-1). */
@Controller()
@RequireRole('public')
@ApiTags(PROBES_TAG)
export class HealthController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly indicators: HealthIndicatorService,
    @Inject(CORE) private readonly core: ControlPlaneCore,
  ) {}

  @Get('livez')
  @HealthCheck()
  @ApiOperation({ summary: 'Process liveness' })
  livez() {
    return this.health.check([() => this.indicators.check('process').up()]);
  }

  @Get('readyz')
  @HealthCheck()
  @ApiOperation({
    summary: 'Readiness: database reachable, migrations applied, startup done, not shutting down',
  })
  readyz() {
    return this.health.check([
      () => {
        const state = this.core.readiness.state;
        const lifecycle = this.indicators.check('lifecycle');
        return state === 'ready' ? lifecycle.up({ state }) : lifecycle.down({ state });
      },
      () =>
        this.indicators
          .check('database')
          .attempt(async () => {
            await this.core.db.ping();
            if (!(await this.core.db.migrationsApplied())) throw new Error('migrations pending');
            return { dialect: this.core.db.dialect };
          })
          .withTimeout(2_000),
    ]);
  }
}
