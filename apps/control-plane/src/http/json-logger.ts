import { LoggerService, LogLevel } from '@nestjs/common';
import { writeOut } from '@ql/contracts';

/**
 * Nest's start-up narration (every module loaded, every route mapped: 70 lines) is debug: at info the
 * quickstart's connection banner comes right after the start (ADR 0034).
 */
const START_UP_CONTEXTS = new Set([
  'NestFactory',
  'InstanceLoader',
  'RoutesResolver',
  'RouterExplorer',
  'NestApplication',
]);

/** Structured JSON lines on stdout (R-OPS-2); callers never pass tokens or label values. */
export class JsonLogger implements LoggerService {
  constructor(private readonly levels: LogLevel[]) {}

  log(message: unknown, context?: string) {
    if (context !== undefined && START_UP_CONTEXTS.has(context))
      this.write('debug', 'debug', message, context);
    else this.write('info', 'log', message, context);
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
    writeOut(`${JSON.stringify({ time: new Date().toISOString(), level, context, ...fields })}\n`);
  }
}
