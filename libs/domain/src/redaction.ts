/** What a secret value becomes in a run's output (issue 19 item 7, ADR 0050). */
export const REDACTED = '***';

/**
 * The values worth redacting: distinct, non-empty, longest first (so a value that contains a shorter
 * one is replaced whole). A value as delivered (several secrets joined) and each secret alone both
 * count: the caller passes every one.
 */
export function redactionValues(values: Iterable<string>): string[] {
  return [...new Set([...values].filter((v) => v.length > 0))].sort((a, b) => b.length - a.length);
}

/** Every occurrence of each value in `text` replaced by `***`, leftmost first, longest at a position. */
export function redactText(text: string, values: readonly string[]): string {
  if (values.length === 0 || text.length === 0) return text;
  const redactor = new StreamRedactor(values);
  return redactor.write(text) + redactor.end();
}

/**
 * Redaction of one stream of text that arrives in pieces (issue 19 item 7): a value split between two
 * pieces is still found. `write` returns what is safe to emit now and keeps back at most the longest
 * value's length less one character (never half a surrogate pair); `end` returns the rest. The kept
 * tail is raw text: `***` is never matched again.
 */
export class StreamRedactor {
  private readonly values: readonly string[];
  private readonly keep: number;
  private pending = '';

  constructor(values: Iterable<string>) {
    this.values = redactionValues(values);
    this.keep = this.values.length === 0 ? 0 : this.values[0]!.length - 1;
  }

  get active(): boolean {
    return this.values.length > 0;
  }

  write(text: string): string {
    if (!this.active) return text;
    const raw = this.pending + text;
    let cut = Math.max(0, raw.length - this.keep);
    const matches = this.matches(raw);
    // A value that starts before the cut ends inside `raw` (it is at most keep + 1 long): emit it whole.
    for (const m of matches) if (m.start < cut && m.end > cut) cut = m.end;
    const high = raw.charCodeAt(cut - 1);
    if (cut > 0 && cut < raw.length && high >= 0xd800 && high <= 0xdbff) cut--;
    this.pending = raw.slice(cut);
    return render(
      raw,
      matches.filter((m) => m.start < cut),
      cut,
    );
  }

  end(): string {
    const raw = this.pending;
    this.pending = '';
    return render(raw, this.matches(raw), raw.length);
  }

  /** Non-overlapping occurrences, leftmost first and the longest value at each position. */
  private matches(raw: string): { start: number; end: number }[] {
    const found: { start: number; end: number }[] = [];
    let at = 0;
    while (at < raw.length) {
      let best: { start: number; end: number } | null = null;
      for (const value of this.values) {
        const start = raw.indexOf(value, at);
        if (start < 0) continue;
        if (!best || start < best.start || (start === best.start && start + value.length > best.end))
          best = { start, end: start + value.length };
      }
      if (!best) break;
      found.push(best);
      at = best.end;
    }
    return found;
  }
}

function render(raw: string, matches: readonly { start: number; end: number }[], cut: number): string {
  let out = '';
  let at = 0;
  for (const m of matches) {
    out += raw.slice(at, m.start) + REDACTED;
    at = m.end;
  }
  return out + raw.slice(at, cut);
}
