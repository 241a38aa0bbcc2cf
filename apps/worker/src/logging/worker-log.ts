import type { LoggerService } from '@nestjs/common';
import { writeOut } from '@ql/contracts';
import { WORKER_LOG_LEVELS, WorkerLogLevel } from '../config/worker-config';

export type LogFields = Readonly<
  Record<string, string | number | boolean | null | undefined | readonly string[]>
>;

/** Structured JSON lines (R-OPS-2). Callers pass ids and codes only: never keys, tokens or label values. */
export interface WorkerLog {
  debug(msg: string, fields?: LogFields): void;
  info(msg: string, fields?: LogFields): void;
  warn(msg: string, fields?: LogFields): void;
  error(msg: string, fields?: LogFields): void;
}
export const WORKER_LOG = Symbol('WorkerLog');

export class JsonLineLog implements WorkerLog {
  private readonly min: number;
  constructor(
    level: WorkerLogLevel = 'info',
    // A closed terminal or pipe (EIO/EPIPE) drops the lines, never the process (ADR 0034).
    private readonly write: (line: string) => void = writeOut,
    private readonly base: LogFields = {},
  ) {
    this.min = WORKER_LOG_LEVELS.indexOf(level);
  }

  debug(msg: string, fields?: LogFields) {
    this.emit('debug', msg, fields);
  }
  info(msg: string, fields?: LogFields) {
    this.emit('info', msg, fields);
  }
  warn(msg: string, fields?: LogFields) {
    this.emit('warn', msg, fields);
  }
  error(msg: string, fields?: LogFields) {
    this.emit('error', msg, fields);
  }

  private emit(level: WorkerLogLevel, msg: string, fields: LogFields = {}) {
    if (WORKER_LOG_LEVELS.indexOf(level) < this.min) return;
    this.write(
      `${JSON.stringify({ time: new Date().toISOString(), level, msg, ...this.base, ...fields })}\n`,
    );
  }
}

/** Nest's own messages (context building, errors) on the same JSON lines; its chatty `log` level is debug. */
export class NestJsonLogger implements LoggerService {
  constructor(private readonly sink: WorkerLog) {}
  log(message: unknown, context?: string) {
    this.sink.debug(String(message), { context });
  }
  error(message: unknown, ...rest: unknown[]) {
    this.sink.error(String(message), { context: contextOf(rest) });
  }
  warn(message: unknown, context?: string) {
    this.sink.warn(String(message), { context });
  }
  debug(message: unknown, context?: string) {
    this.sink.debug(String(message), { context });
  }
  fatal(message: unknown, context?: string) {
    this.sink.error(String(message), { context });
  }
}

function contextOf(rest: unknown[]): string | undefined {
  const last = rest[rest.length - 1];
  return typeof last === 'string' ? last : undefined;
}
