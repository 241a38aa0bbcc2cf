import { StringDecoder } from 'node:string_decoder';
import { LogStream, RedactionPatterns, StreamRedactor } from '@ql/domain';
import type { OutputChunk } from '../executor/output-limiter';

/** The most UTF-8 bytes one `logs` chunk carries (RUN_LOG_LIMITS.chunkBytes on the control plane). */
export const LOG_TEXT_MAX_BYTES = 60 * 1024;

// The one character the wire refuses in log text (PostgreSQL text cannot hold it); the rest is sent
// as the task wrote it and neutralized where the control plane shows it (ADR 0032).
// eslint-disable-next-line no-control-regex
const REFUSED = /\u0000/g;

/** One `logs` text and the stream it came from; the worker's truncation marker is `system`. */
export interface LogText {
  readonly stream: LogStream;
  readonly text: string;
}

/**
 * Turns a run's output chunks into wire-safe log texts: UTF-8 decoded per stream (a character cut
 * between two chunks is joined again), invalid bytes and NUL become U+FFFD, and no text is empty or
 * longer than `maxBytes` UTF-8 bytes. Each text keeps its chunk's stream.
 */
export class OutputText {
  private readonly decoders = { stdout: new StringDecoder('utf8'), stderr: new StringDecoder('utf8') };
  /** Per stream: the attempt's secret values become `***` (ADR 0050), also across chunks. */
  private redactors: Record<'stdout' | 'stderr', StreamRedactor> | null = null;

  constructor(private readonly maxBytes: number = LOG_TEXT_MAX_BYTES) {}

  /** From now on every value in `values` is `***` in the texts (set before the process starts). */
  redact(values: readonly string[]): void {
    const patterns = new RedactionPatterns(values); // one set of patterns per attempt, both streams
    this.redactors = patterns.empty
      ? null
      : { stdout: new StreamRedactor(patterns), stderr: new StreamRedactor(patterns) };
  }

  texts(chunk: OutputChunk): LogText[] {
    if (chunk.truncated) {
      // The cap cut the output here: what the redaction held may be a value's start, so it is hidden
      // (issue 27 item 2), and goes out before the cap's marker.
      const marker = { stream: 'system' as const, text: chunk.data.toString('utf8') };
      return [...this.flush((r) => r.cut()), ...this.pieces('system', marker.text)];
    }
    const decoded = this.decoders[chunk.stream].write(chunk.data);
    return this.pieces(chunk.stream, this.redactors ? this.redactors[chunk.stream].write(decoded) : decoded);
  }

  /** The output has ended: what the redaction still holds back, redacted. */
  end(): LogText[] {
    return this.flush((r) => r.end());
  }

  private flush(rest: (redactor: StreamRedactor) => string): LogText[] {
    if (!this.redactors) return [];
    const { stdout, stderr } = this.redactors;
    return [...this.pieces('stdout', rest(stdout)), ...this.pieces('stderr', rest(stderr))];
  }

  private pieces(stream: LogStream, text: string): LogText[] {
    return splitUtf8(text.replace(REFUSED, '\uFFFD'), this.maxBytes).map((piece) => ({
      stream,
      text: piece,
    }));
  }
}

/** Pieces of at most `maxBytes` UTF-8 bytes each, never splitting a character; none is empty. */
export function splitUtf8(text: string, maxBytes: number): string[] {
  if (Buffer.byteLength(text, 'utf8') <= maxBytes) return text ? [text] : [];
  const pieces: string[] = [];
  let piece = '';
  let bytes = 0;
  for (const char of text) {
    const size = Buffer.byteLength(char, 'utf8');
    if (bytes + size > maxBytes) {
      pieces.push(piece);
      piece = '';
      bytes = 0;
    }
    piece += char;
    bytes += size;
  }
  if (piece) pieces.push(piece);
  return pieces;
}
