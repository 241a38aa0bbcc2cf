import { LoggerService, LogLevel } from '@nestjs/common';

/** Structured JSON lines on stdout (R-OPS-2); callers never pass tokens or label values. */
export class JsonLogger implements LoggerService {
  constructor(private readonly levels: LogLevel[]) {}

  log(message: unknown, context?: string) {
    this.write('info', 'log', message, context);
  }
  error(message: unknown, ...rest: unknown[]) {
    this.write('error', 'error', message, rest[rest.length - 1] as string | undefined);
  }
  warn(message: unknown, context?: string) {
    this.write('warn', 'warn', message, context);
  }
  debug(message: unknown, context?: string) {
    this.write('debug', 'debug', message, context);
  }
  fatal(message: unknown, context?: string) {
    this.write('fatal', 'fatal', message, context);
  }

  private write(level: string, nestLevel: LogLevel, message: unknown, context?: string) {
    if (!this.levels.includes(nestLevel)) return;
    const fields = typeof message === 'object' && message !== null ? message : { msg: String(message) };
    process.stdout.write(
      `${JSON.stringify({ time: new Date().toISOString(), level, context, ...fields })}\n`,
    );
  }
}
