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
