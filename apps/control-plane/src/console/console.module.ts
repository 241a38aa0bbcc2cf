import { Module } from '@nestjs/common';
import { ConsoleSessionsController, CurrentSessionController } from './console-sessions.controller';
import { ConsoleSessionsService } from './console-sessions.service';

/** The web console's sign-in and sessions on the admin listener (ADR 0052). */
@Module({
  controllers: [CurrentSessionController, ConsoleSessionsController],
  providers: [ConsoleSessionsService],
})
export class ConsoleModule {}
