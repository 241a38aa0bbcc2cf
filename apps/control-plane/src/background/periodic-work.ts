import { Logger } from '@nestjs/common';

/**
 * One non-overlapping, unref'd loop: the next cycle is scheduled only after the previous one ended,
 * so a slow database never stacks cycles. Nothing runs until `start()`; `stop()` waits for the cycle
 * in flight.
 */
export class PeriodicWork {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private stopped = true;

  constructor(
    private readonly name: string,
    private readonly intervalMs: number,
    private readonly cycle: () => Promise<unknown>,
    private readonly logger = new Logger(name),
  ) {}

  start(): void {
    if (this.intervalMs <= 0 || !this.stopped) return;
    this.stopped = false;
    this.schedule();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    await this.running;
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.running = this.cycle()
        .then(
          () => undefined,
          (error: unknown) => this.logger.warn({ msg: `${this.name} cycle failed`, error: String(error) }),
        )
        .finally(() => {
          this.running = undefined;
          this.schedule();
        });
    }, this.intervalMs);
    this.timer.unref();
  }
}
