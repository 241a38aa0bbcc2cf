import { Module } from '@nestjs/common';
import { TerminusModule } from '@nestjs/terminus';
import { HealthController } from './health.controller';

/** `/livez` and `/readyz` through @nestjs/terminus (R-OPS-1); no credentials. */
@Module({
  imports: [TerminusModule.forRoot({ errorLogStyle: 'json', logger: false })],
  controllers: [HealthController],
})
export class HealthModule {}
