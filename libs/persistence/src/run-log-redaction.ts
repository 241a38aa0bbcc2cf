import {
  HeldOutput,
  LogStream,
  RedactionPatterns,
  RunRecord,
  SecretCipher,
  StreamRedactor,
  macMatches,
  redactText,
  secretMac,
} from '@ql/domain';
import type { SqlExecutor } from './sql-executor';

/** Where the control plane's redaction (ADR 0050) gets a run's values, and the key it seals with. */
export interface RedactionSource {
  /** The values to redact from a run's output; empty when its revision maps none. */
  readonly values: (tx: SqlExecutor, run: RunRecord) => Promise<string[]>;
  readonly cipher: SecretCipher | undefined;
}

/**
 * Pattern units kept across attempts (`RedactionPatterns.size`: one per code unit of the values, each
 * about 24 bytes once the automaton is built, and the tables counted in such units): the cache's
 * bound, not a count of attempts.
 */
const CACHED_NODES_MAX = 4_000_000;

/** A chunk as stored: what the redaction let out now, the sealed held state after it, the chunk's MAC. */
export interface RedactedChunk {
  readonly text: string;
  readonly held: string | null;
  readonly mac: string;
}

type HeldStreams = Record<string, HeldOutput>;

/**
 * The control plane's second redaction (ADR 0050, issue 27 item 1): one set of patterns per attempt,
 * built once per replica from the values the attempt had at its first chunk; what a stream holds back
 * between chunks lives in the attempt's row, sealed (`attempts.log_held`), so it holds across requests
 * and replicas, and a chunk is known again by a keyed MAC of its text as it came.
 */
export class LogRedactor {
  private readonly cache = new Map<string, RedactionPatterns>();
  private cachedNodes = 0;

  constructor(private readonly source?: RedactionSource) {}

  /** Whether anything can be redacted at all (a secrets key is configured). */
  get active(): boolean {
    return Boolean(this.source?.cipher);
  }

  /** The attempt's patterns, or null when nothing is to be redacted. */
  async patterns(tx: SqlExecutor, run: RunRecord, attemptId: string): Promise<RedactionPatterns | null> {
    const cipher = this.source?.cipher;
    if (!cipher) return null;
    let patterns = this.cache.get(attemptId);
    if (!patterns) {
      patterns = new RedactionPatterns(await this.source!.values(tx, run));
      this.remember(attemptId, patterns);
    }
    return patterns.empty ? null : patterns;
  }

  /** One chunk of `stream`, going on from the sealed `held` state of the attempt. */
  chunk(
    patterns: RedactionPatterns,
    attemptId: string,
    held: string | null,
    stream: LogStream | null,
    text: string,
  ): RedactedChunk {
    const streams = this.open(attemptId, held);
    const key = stream ?? 'unknown';
    const redactor = StreamRedactor.resume(patterns, streams[key] ?? { text: '', hiddenHead: null });
    const out = redactor.write(text);
    const after = redactor.held();
    if (after.text) streams[key] = after;
    else delete streams[key];
    return { text: out, held: this.seal(attemptId, streams), mac: this.mac(stream, text) };
  }

  /**
   * What each stream still holds, to store as the attempt ends: as written when the worker said its
   * output ended (`end`), hidden whole when it was cut off (`cut`: a sweep ended it).
   */
  flush(
    patterns: RedactionPatterns,
    attemptId: string,
    held: string,
    how: 'end' | 'cut',
  ): { stream: LogStream | null; text: string }[] {
    return Object.entries(this.open(attemptId, held)).map(([key, state]) => {
      const redactor = StreamRedactor.resume(patterns, state);
      const text = how === 'end' ? redactor.end() : redactor.cut();
      return { stream: key === 'unknown' ? null : (key as LogStream), text };
    });
  }

  redact(patterns: RedactionPatterns, text: string): string {
    return redactText(text, patterns);
  }

  /** Whether a replay's text is the chunk stored with `mac` (null: its key is gone, so unknowable). */
  sameChunk(stream: LogStream | null, text: string, mac: string): boolean | null {
    return macMatches(this.source!.cipher!, 'log-chunk', `${stream ?? ''}\n${text}`, mac);
  }

  private mac(stream: LogStream | null, text: string): string {
    return secretMac(this.source!.cipher!, 'log-chunk', `${stream ?? ''}\n${text}`);
  }

  private seal(attemptId: string, streams: HeldStreams): string | null {
    if (Object.keys(streams).length === 0) return null;
    return JSON.stringify(this.source!.cipher!.seal(`log-held:${attemptId}`, JSON.stringify(streams)));
  }

  // A held state that no longer opens (its key removed) is dropped: never shown, never stored raw.
  private open(attemptId: string, held: string | null): HeldStreams {
    if (!held) return {};
    try {
      return JSON.parse(this.source!.cipher!.open(`log-held:${attemptId}`, JSON.parse(held))) as HeldStreams;
    } catch {
      return {};
    }
  }

  private remember(attemptId: string, patterns: RedactionPatterns): void {
    for (const [id, old] of this.cache) {
      if (this.cachedNodes + patterns.size <= CACHED_NODES_MAX) break;
      this.cache.delete(id);
      this.cachedNodes -= old.size;
    }
    this.cache.set(attemptId, patterns);
    this.cachedNodes += patterns.size;
  }
}
