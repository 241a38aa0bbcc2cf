export const RUN_LOG_LIMITS = {
  /** One chunk's text, in UTF-8 bytes (the `logs` request is ≤ 64 KiB with its fence). */
  chunkBytes: 60 * 1024,
  /** Default per-run cap of stored output (QL_RUN_LOG_CAP_BYTES). */
  defaultRunCapBytes: 1024 * 1024,
  maxSeq: 2 ** 31 - 1,
  /** Rows per admin read page. */
  maxPage: 256,
  /**
   * The chunks a `completion` may carry as `finalLogs` (ADR 0044): what one `logs` body holds, at most
   * this many chunks whose texts total at most `chunkBytes`.
   */
  finalChunks: 64,
} as const;

/** The one visible marker stored where a run's output reached its cap. */
export function truncationMarker(capBytes: number): string {
  return `[output truncated: this run reached its log cap of ${capBytes} bytes; later output was dropped]`;
}

/**
 * Where a chunk of a run's output came from (ADR 0032): the task's standard output or error, or
 * `system` for text neither wrote (the worker's and the control plane's truncation markers).
 */
export const LOG_STREAMS = ['stdout', 'stderr', 'system'] as const;
export type LogStream = (typeof LOG_STREAMS)[number];
/** What the admin views show for a chunk stored without its stream (before ADR 0032, or an older worker). */
export const UNKNOWN_LOG_STREAM = 'unknown';

/** One chunk of a completion's `finalLogs`: a `logs` chunk whose stream is always said. */
export interface FinalLogChunk {
  readonly seq: number;
  readonly stream: LogStream;
  readonly text: string;
}

/**
 * What a terminal or a browser would interpret rather than show: controls (C0 but tab and LF, DEL,
 * C1: CR, ESC and the 8-bit CSI among them), format characters (bidi embeddings, overrides, isolates
 * and marks, zero-width characters, the BOM, tag characters), the line and paragraph separators, and
 * lone surrogates.
 */
const INTERPRETED = /(?![\t\n])[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Cs}]/gu;

const visible = (char: string): string => {
  const code = char.codePointAt(0)!;
  return code > 0xffff ? `\\u{${code.toString(16)}}` : `\\u${code.toString(16).padStart(4, '0')}`;
};

/**
 * Stored output as the admin views show it (ADR 0032): every character of INTERPRETED becomes its
 * visible escape, `\u` and four lowercase hex digits (`\u{…}` above the BMP): CR is `\u000d`, ESC
 * `\u001b`, U+202E `\u202e`. Tab and LF stay. Character by character, with no state: a chunk
 * boundary inside an escape sequence changes nothing, and already neutral text comes back unchanged.
 */
export function displayLogText(raw: string): string {
  return raw.replace(INTERPRETED, visible);
}

/** An ANSI colour/style sequence (SGR): ESC `[`, up to 32 digits and semicolons, `m`. */
// eslint-disable-next-line no-control-regex -- matching the ESC of a colour sequence is the point
const SGR = /\x1b\[[0-9;]{0,32}m/g;

/**
 * Stored output for a renderer of ANSI colours (the web console, ADR 0052): as `displayLogText`,
 * except that a whole SGR sequence within one chunk is kept as it is. Every other escape sequence,
 * and an SGR cut between two chunks, is neutralized as in `displayLogText`.
 */
export function displayAnsiLogText(raw: string): string {
  let out = '';
  let last = 0;
  for (const match of raw.matchAll(SGR)) {
    out += displayLogText(raw.slice(last, match.index)) + match[0];
    last = match.index + match[0].length;
  }
  return out + displayLogText(raw.slice(last));
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
