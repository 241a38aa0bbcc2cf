import { parseLogsAnswer } from '@ql/contracts';
import type { FinalLogChunk } from '@ql/domain';
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
import { monotonicNow } from '../host/monotonic';
import { finalTailStart } from './final-logs';
import { LogText, OutputText } from './output-text';

/** A queued text and when it was queued (monotonic ms). */
interface Queued extends LogText {
  readonly at: number;
}

/**
 * Uploads one attempt's output as `logs` chunks (R-CMP-2): in order, seq 0, 1, 2 … as the wire
 * numbers them, each text ≤ 60 KiB of UTF-8 with the stream it came from (ADR 0032). A chunk that
 * got no answer is sent again with the same seq, stream and text while the lease term lasts. Output waits in memory until `start()` (the executor caps
 * it per run, so the queue is bounded) and one send runs at a time. Each chunk waits its linger
 * first while the queue fits a completion: once the process ended, what is still queued rides on
 * the completion (`finish()`, ADR 0044).
 */
export class LogUploader {
  private readonly queue: Queued[] = [];
  private readonly text = new OutputText();
  private seq = 0;
  private started = false;
  private stopped = false;
  private holding = false;
  private sending: Promise<void> = Promise.resolve();
  /** Ends a linger early: output came, the process ended, or the upload stops. */
  private wake: (() => void) | undefined;

  constructor(
    private readonly channel: LeaseChannel,
    private readonly lease: HeldLease,
    private readonly options: TermOptions,
    private readonly log: WorkerLog,
    private readonly ids: Record<string, string>,
    /** How long a chunk may wait for the process to end and ride on the completion (ADR 0044). */
    private readonly lingerMs = 0,
  ) {}

  /** Chunks sent as `logs` calls and acknowledged so far. */
  get uploaded(): number {
    return this.seq;
  }

  /** The attempt's secret values: each becomes `***` in what is uploaded (ADR 0050). Before output. */
  redact(values: readonly string[]): void {
    this.text.redact(values);
  }

  push(chunk: OutputChunk): void {
    if (this.stopped) return;
    this.enqueue(this.text.texts(chunk));
  }

  private enqueue(texts: readonly LogText[]): void {
    if (texts.length === 0) return;
    const at = monotonicNow();
    for (const text of texts) this.queue.push({ ...text, at });
    this.wake?.(); // the queue may now be past what the completion can carry
    this.kick();
  }

  /** From now on chunks go out (the attempt is acknowledged running). */
  start(): void {
    this.started = true;
    this.kick();
  }

  /**
   * The process ended (ADR 0044): no chunk starts going out as a `logs` call any more until
   * `finish()` has said which ones ride on the completion instead.
   */
  hold(): void {
    // The output has ended: the tail the redaction held back is output too.
    if (!this.stopped) this.enqueue(this.text.end());
    this.holding = true;
    this.wake?.();
  }

  /**
   * The process has exited and its output is all pushed (ADR 0044): once a send under way ended, the
   * chunks before the tail that fits the completion (`finalTailStart`) are sent as `logs` calls, and
   * the tail comes back, seqs given, for the completion to carry; nothing more is sent from here.
   * Empty when the upload gave up (or never started). `ride` false (a v1 session, which has no
   * `finalLogs`, ADR 0062): every chunk goes as a `logs` call and nothing comes back.
   */
  async finish(ride = true): Promise<FinalLogChunk[]> {
    this.hold();
    await this.sending;
    if (this.started && !this.stopped) {
      const keep = ride ? this.queue.length - finalTailStart(this.queue, this.seq) : 0;
      this.holding = false;
      this.kick(keep);
      await this.sending;
    }
    const final = this.started && !this.stopped ? this.queue.splice(0) : [];
    this.stopped = true;
    return final.map(({ stream, text }, i) => ({ seq: this.seq + i, stream, text }));
  }

  /**
   * Before `start()`, once the process ended (ADR 0047): when everything queued fits on the
   * completion, all of it rides there (seq 0 …) and nothing is sent from here; otherwise null, and
   * the upload goes on as usual.
   */
  takeAll(): FinalLogChunk[] | null {
    if (!this.stopped) this.enqueue(this.text.end());
    if (this.started || this.stopped || finalTailStart(this.queue, this.seq) > 0) return null;
    this.stopped = true;
    return this.queue.splice(0).map(({ stream, text }, i) => ({ seq: this.seq + i, stream, text }));
  }

  /** No more sends (the lease is gone, or the worker stops). */
  stop(): void {
    this.stopped = true;
    this.wake?.();
  }

  private kick(keep = 0): void {
    if (!this.started || this.stopped) return;
    this.sending = this.sending.then(() => this.drain(keep));
  }

  /** Sends queued chunks in order until `keep` are left; while the process runs, each after its linger. */
  private async drain(keep: number): Promise<void> {
    while (this.queue.length > keep && !this.stopped && !this.holding) {
      const lingerMs = keep === 0 ? this.lingerLeft() : 0;
      if (lingerMs > 0) {
        await this.linger(lingerMs);
        continue;
      }
      const { stream, text } = this.queue[0]!;
      try {
        // The answer is read by the contract's strict reader (ingress/logs.ts), though nothing in it is used.
        await callInTerm(
          this.channel,
          'logs',
          this.lease,
          { seq: this.seq, stream, text },
          { ...this.options, parse: parseLogsAnswer },
        );
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

  /**
   * How much longer the oldest queued chunk may wait for the process to end (0: send it now). Never
   * while the queue is past what the completion carries: its head goes as a `logs` call either way.
   */
  private lingerLeft(): number {
    if (this.lingerMs === 0 || this.options.signal.aborted) return 0;
    if (finalTailStart(this.queue, this.seq) > 0) return 0;
    return this.queue[0]!.at + this.lingerMs - monotonicNow();
  }

  private linger(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.options.signal.removeEventListener('abort', done);
        this.wake = undefined;
        resolve();
      };
      const timer = setTimeout(done, ms);
      timer.unref();
      this.options.signal.addEventListener('abort', done, { once: true });
      this.wake = done;
    });
  }
}
