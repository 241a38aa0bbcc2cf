import type { OutputChunk } from '../executor/output-limiter';
import type { WorkerLog } from '../logging/worker-log';
import {
  HeldLease,
  LeaseChannel,
  TermOptions,
  callInTerm,
  describeError,
  isLeaseFenced,
} from './lease-channel';
import { LogText, OutputText } from './output-text';

/**
 * Uploads one attempt's output as `logs` chunks (R-CMP-2): in order, seq 0, 1, 2 … as the wire
 * numbers them, each text ≤ 60 KiB of UTF-8 with the stream it came from (ADR 0032). A chunk that
 * got no answer is sent again with the same seq, stream and text while the lease term lasts. Output waits in memory until `start()` (the executor caps
 * it per run, so the queue is bounded) and one send runs at a time.
 */
export class LogUploader {
  private readonly queue: LogText[] = [];
  private readonly text = new OutputText();
  private seq = 0;
  private started = false;
  private stopped = false;
  private sending: Promise<void> = Promise.resolve();

  constructor(
    private readonly channel: LeaseChannel,
    private readonly lease: HeldLease,
    private readonly options: TermOptions,
    private readonly log: WorkerLog,
    private readonly ids: Record<string, string>,
  ) {}

  /** Chunks sent and acknowledged so far. */
  get uploaded(): number {
    return this.seq;
  }

  push(chunk: OutputChunk): void {
    if (this.stopped) return;
    this.queue.push(...this.text.texts(chunk));
    this.kick();
  }

  /** From now on chunks go out (the attempt is acknowledged running). */
  start(): void {
    this.started = true;
    this.kick();
  }

  /** Resolves once every chunk pushed so far was sent (or the upload gave up). */
  async flush(): Promise<void> {
    while (this.started && !this.stopped && this.queue.length > 0) {
      this.kick();
      await this.sending;
    }
  }

  /** No more sends (the lease is gone, or the worker stops). */
  stop(): void {
    this.stopped = true;
  }

  private kick(): void {
    if (!this.started || this.stopped) return;
    this.sending = this.sending.then(() => this.drain());
  }

  private async drain(): Promise<void> {
    while (this.queue.length > 0 && !this.stopped) {
      const { stream, text } = this.queue[0]!;
      try {
        await callInTerm(this.channel, 'logs', this.lease, { seq: this.seq, stream, text }, this.options);
        this.queue.shift();
        this.seq++;
      } catch (error) {
        this.stopped = true;
        const level = isLeaseFenced(error) || this.options.signal.aborted ? 'warn' : 'error';
        this.log[level]('log upload stopped; later output of this attempt is not uploaded', {
          ...this.ids,
          seq: this.seq,
          pending: this.queue.length,
          ...describeError(error),
        });
      }
    }
  }
}
