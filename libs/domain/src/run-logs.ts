import { utf8Length } from './canonical-json';
import { ValidationError } from './errors';
import { readInt, readString } from './strict';

export const RUN_LOG_LIMITS = {
  /** One chunk's text, in UTF-8 bytes (the `logs` request is ≤ 64 KiB with its fence). */
  chunkBytes: 60 * 1024,
  /** Default per-run cap of stored output (QL_RUN_LOG_CAP_BYTES). */
  defaultRunCapBytes: 1024 * 1024,
  maxSeq: 2 ** 31 - 1,
  /** Rows per admin read page. */
  maxPage: 256,
} as const;

/** The one visible marker stored where a run's output reached its cap. */
export function truncationMarker(capBytes: number): string {
  return `[output truncated: this run reached its log cap of ${capBytes} bytes; later output was dropped]`;
}

/** A chunk of output: multi-line text (tab, CR, LF allowed; other controls are not). */
export function readLogChunk(raw: { seq: unknown; text: unknown }): { seq: number; text: string } {
  const seq = readInt(raw.seq, 'seq', 0, RUN_LOG_LIMITS.maxSeq);
  const text = readString(raw.text, 'text', { max: RUN_LOG_LIMITS.chunkBytes, multiline: true });
  if (utf8Length(text) > RUN_LOG_LIMITS.chunkBytes) throw new ValidationError('text', 'too_long');
  return { seq, text };
}

export type LogChunkDecision =
  /** Appended as the attempt's next chunk. */
  | { readonly kind: 'store' }
  /** Over the run's cap: the marker is stored (once per run) and the chunk dropped. */
  | { readonly kind: 'truncate' }
  /** Past the cap, marker already stored: accepted and dropped. */
  | { readonly kind: 'drop' }
  /** A sequence number already taken: compare with what was stored (a dropped one is gone). */
  | { readonly kind: 'seen' }
  /** The worker skipped a chunk: refused, so nothing is silently missing. */
  | { readonly kind: 'gap' };

/**
 * R-CMP-2: chunks arrive in sequence per attempt (0, 1, …); the run's stored output stays within
 * `capBytes`, and the first chunk that would pass it is replaced by one truncation marker.
 */
export function decideLogChunk(input: {
  readonly seq: number;
  readonly nextSeq: number;
  readonly bytes: number;
  readonly runLogBytes: number;
  readonly truncated: boolean;
  readonly capBytes: number;
}): LogChunkDecision {
  if (input.seq < input.nextSeq) return { kind: 'seen' };
  if (input.seq > input.nextSeq) return { kind: 'gap' };
  if (input.truncated) return { kind: 'drop' };
  if (input.runLogBytes + input.bytes > input.capBytes) return { kind: 'truncate' };
  return { kind: 'store' };
}
