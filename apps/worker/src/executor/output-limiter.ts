/** One piece of a run's output, in order across both streams; feeds the log upload (R-CMP-2). */
export interface OutputChunk {
  readonly seq: number;
  readonly stream: 'stdout' | 'stderr';
  readonly data: Buffer;
  /** The marker chunk: the per-run cap was reached here and later output is dropped. */
  readonly truncated: boolean;
}

/**
 * Cuts output into chunks of at most `chunkBytes` and stops at `capBytes` per run with one visible
 * marker; later output is still read (so the child never blocks on a full pipe) and only counted.
 */
export class OutputLimiter {
  private seq = 0;
  private used = 0;
  private dropped = 0;
  private capped = false;

  constructor(
    private readonly capBytes: number,
    private readonly chunkBytes: number,
    private readonly sink: (chunk: OutputChunk) => void,
  ) {}

  get bytes(): number {
    return this.used;
  }
  get droppedBytes(): number {
    return this.dropped;
  }

  push(stream: OutputChunk['stream'], data: Buffer): void {
    if (this.capped) {
      this.dropped += data.length;
      return;
    }
    const take = Math.min(data.length, this.capBytes - this.used);
    for (let at = 0; at < take; at += this.chunkBytes) {
      this.emit(stream, data.subarray(at, Math.min(take, at + this.chunkBytes)), false);
    }
    this.used += take;
    if (take < data.length) {
      this.capped = true;
      this.dropped += data.length - take;
      this.emit(
        stream,
        Buffer.from(`\n[output truncated: the ${this.capBytes}-byte cap was reached]\n`),
        true,
      );
    }
  }

  private emit(stream: OutputChunk['stream'], data: Buffer, truncated: boolean): void {
    try {
      this.sink({ seq: this.seq++, stream, data, truncated });
    } catch {
      // A failing consumer (log upload) must not take the run down with it.
    }
  }
}
