import { HeartbeatAnswer, HeartbeatCommand, WorkerSessionRepository } from './ports';

export interface HeartbeatBatchOptions {
  /** How long the first heartbeat of a batch waits for others; 0 sends each heartbeat alone. */
  readonly windowMs: number;
  /** A batch is sent as soon as it holds this many heartbeats (1 sends each alone). */
  readonly maxSize: number;
  /** Cancel intents each answer carries at most (R-RUN-5). */
  readonly cancelLimit: number;
}

interface Waiting {
  readonly command: HeartbeatCommand;
  resolve(answer: HeartbeatAnswer): void;
  reject(reason: unknown): void;
}

/**
 * Coalesces the heartbeats a replica receives within `windowMs` (at most `maxSize`) into one
 * `heartbeatBatch` call: one statement and one commit, each caller settled with its own answer or
 * refusal. A failure of the whole batch (the database unreachable) fails each of its callers with
 * that error (ADR 0018).
 */
export class HeartbeatBatcher {
  private waiting: Waiting[] = [];
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly sessions: Pick<WorkerSessionRepository, 'heartbeatBatch'>,
    private readonly options: HeartbeatBatchOptions,
  ) {}

  heartbeat(command: HeartbeatCommand): Promise<HeartbeatAnswer> {
    return new Promise<HeartbeatAnswer>((resolve, reject) => {
      this.waiting.push({ command, resolve, reject });
      if (this.waiting.length >= this.options.maxSize || this.options.windowMs <= 0) this.flush();
      else this.timer ??= setTimeout(() => this.flush(), this.options.windowMs);
    });
  }

  private flush(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    const batch = this.waiting;
    this.waiting = [];
    void this.sessions
      .heartbeatBatch(
        batch.map((w) => w.command),
        this.options.cancelLimit,
      )
      .then(
        (settled) =>
          settled.forEach((result, i) =>
            result.status === 'fulfilled' ? batch[i]!.resolve(result.value) : batch[i]!.reject(result.reason),
          ),
        (error: unknown) => batch.forEach((w) => w.reject(error)),
      );
  }
}
