import { Logger } from '@nestjs/common';
import type { SchedulerRegistry } from '@nestjs/schedule';

/** The part of a logger a loop needs. */
export interface LoopLogger {
  warn(message: unknown): void;
}

/**
 * One non-overlapping, unref'd loop registered in @nestjs/schedule's `SchedulerRegistry` under its
 * name: the next cycle's timeout is added only after the previous cycle ended, so a slow database
 * never stacks cycles. Nothing runs until `start()`; `stop()` removes the timeout and waits for the
 * cycle in flight. A fixed-rate `addInterval` would overlap slow cycles, hence a re-armed timeout.
 */
export class ScheduledLoop {
  private running: Promise<void> | undefined;
  private stopped = true;
  /** `runSoon()` was called while a cycle ran: the next one starts as soon as it ends. */
  private soon = false;

  constructor(
    private readonly registry: SchedulerRegistry,
    readonly name: string,
    private readonly intervalMs: number,
    private readonly cycle: () => Promise<unknown>,
    private readonly logger: LoopLogger = new Logger(name),
  ) {}

  /** Whether a cycle is waiting in the registry (for tests and probes). */
  get armed(): boolean {
    return this.registry.doesExist('timeout', this.name);
  }

  start(): void {
    if (this.intervalMs <= 0 || !this.stopped) return;
    this.stopped = false;
    this.arm();
  }

  /**
   * The next cycle now rather than after the interval (a worker's slot just freed): at once if the loop
   * is waiting, right after the cycle in flight if one runs. Cycles still never overlap; a stopped
   * loop ignores it.
   */
  runSoon(): void {
    if (this.stopped) return;
    if (this.running) {
      this.soon = true;
      return;
    }
    this.disarm();
    this.arm(0);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.disarm();
    await this.running;
  }

  private arm(delayMs: number = this.intervalMs): void {
    if (this.stopped) return;
    const wait = this.soon ? 0 : delayMs;
    this.soon = false;
    const timer = setTimeout(() => {
      this.disarm();
      this.running = this.cycle()
        .then(
          () => undefined,
          (error: unknown) => this.logger.warn({ msg: `${this.name} cycle failed`, error: String(error) }),
        )
        .finally(() => {
          this.running = undefined;
          this.arm();
        });
    }, wait);
    // The owner of the process decides its lifetime; a loop never keeps it alive.
    timer.unref();
    this.registry.addTimeout(this.name, timer);
  }

  /** The registry may already have cleared it (ScheduleModule clears every timeout at shutdown). */
  private disarm(): void {
    if (this.registry.doesExist('timeout', this.name)) this.registry.deleteTimeout(this.name);
  }
}
