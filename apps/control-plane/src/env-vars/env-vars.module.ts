import { Module } from '@nestjs/common';
import { EnvVarsController } from './env-vars.controller';
import { EnvVarsService } from './env-vars.service';

/** Global env vars on the admin listener (issue 31 item 2, ADR 0061). */
@Module({
  controllers: [EnvVarsController],
  providers: [EnvVarsService],
  exports: [EnvVarsService],
})
export class EnvVarsAdminModule {}
