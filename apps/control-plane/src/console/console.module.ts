import { Module } from '@nestjs/common';
import { ConsolePagesController } from './console-pages.controller';
import { ConsoleSessionsController, CurrentSessionController } from './console-sessions.controller';
import { ConsoleSessionsService } from './console-sessions.service';

/** The web console on the admin listener: its page and assets, sign-in and sessions (ADR 0052). */
@Module({
  controllers: [ConsolePagesController, CurrentSessionController, ConsoleSessionsController],
  providers: [ConsoleSessionsService],
})
export class ConsoleModule {}
