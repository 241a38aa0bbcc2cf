import type { LoggerService } from '@nestjs/common';

/** Every line a Nest logger was given, at every level, as text: what tests grep for values that must not be there. */
export class CapturedLog implements LoggerService {
  readonly lines: string[] = [];
  private keep = (...args: unknown[]) => void this.lines.push(JSON.stringify(args));
  log = this.keep;
  error = this.keep;
  warn = this.keep;
  debug = this.keep;
  verbose = this.keep;
  fatal = this.keep;
}

/** Every line a Nest logger was given, with its level: what tests check for errors and one-off warnings. */
export class LevelledLog implements LoggerService {
  readonly lines: { level: string; text: string }[] = [];
  private keep =
    (level: string) =>
    (...args: unknown[]) =>
      void this.lines.push({ level, text: JSON.stringify(args) });
  log = this.keep('log');
  error = this.keep('error');
  warn = this.keep('warn');
  debug = this.keep('debug');
  verbose = this.keep('verbose');
  fatal = this.keep('fatal');

  at(level: string): string[] {
    return this.lines.filter((l) => l.level === level).map((l) => l.text);
  }
}
