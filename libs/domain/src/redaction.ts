import { NONE, RedactionPatterns, gramHash } from './redaction-patterns';

export { RedactionPatterns, redactionValues } from './redaction-patterns';

/** What a secret value becomes in a run's output (issue 19 item 7, ADR 0050). */
export const REDACTED = '***';

/** What a stream's redaction still holds back between two pieces: kept by the control plane (ADR 0050). */
export interface HeldOutput {
  /** The raw text not yet emitted: the longest end of the stream that may still grow into a value. */
  readonly text: string;
  /**
   * null: what went out before `text` did not end in a `***`; else how many of the first code units
   * of `text` the last `***` that went out still covers (0: it ended right before `text`).
   */
  readonly hiddenHead: number | null;
}

/** Every occurrence of each value in `text` as `***`: overlapping or adjacent occurrences make one. */
export function redactText(text: string, values: readonly string[] | RedactionPatterns): string {
  const redactor = new StreamRedactor(values);
  if (!redactor.active || text.length === 0) return text;
  return redactor.write(text) + redactor.end();
}

/**
 * Redaction of one stream of text that arrives in pieces (issue 19 item 7, issue 27): a value split
 * between two pieces is still found, and every code unit that belongs to any occurrence of any value
 * is hidden (overlapping values too); each stretch of hidden units becomes one `***`. `write`
 * returns what is final now and holds back only the end of the stream that is the start of some
 * value (the automaton's depth; never half a surrogate pair); `end` returns the rest as it is, `cut`
 * hides it (the output was cut there, so what is held may be a value's start). The cost of a write
 * is linear in its length plus what was held (`work` counts the automaton's steps).
 */
export class StreamRedactor {
  private readonly patterns: RedactionPatterns;
  private node = 0;
  private pending = '';
  /** Hidden stretches over `pending`, flat [start, end) pairs in order; the first may already be out. */
  private runs: number[] = [];
  private headOut = false;
  /** Text a `resume` found final, emitted with the next write. */
  private carry = '';
  /** Automaton steps taken so far (gotos and failure hops): the measure of the redaction's cost. */
  work = 0;

  constructor(values: Iterable<string> | RedactionPatterns) {
    this.patterns = values instanceof RedactionPatterns ? values : new RedactionPatterns(values);
  }

  /** A redactor that goes on from what another one held (the control plane's stored tail). */
  static resume(patterns: RedactionPatterns, held: HeldOutput): StreamRedactor {
    const redactor = new StreamRedactor(patterns);
    if (held.hiddenHead !== null) {
      redactor.runs = [0, held.hiddenHead];
      redactor.headOut = true;
    }
    redactor.carry = redactor.write(held.text);
    return redactor;
  }

  get active(): boolean {
    return !this.patterns.empty;
  }

  /** What the stream holds back after a write (empty text: nothing). */
  held(): HeldOutput {
    return { text: this.pending, hiddenHead: this.headOut ? this.runs[1]! : null };
  }

  write(text: string): string {
    if (!this.active) return text;
    const { rootNext, out, depth, oneCode, oneNext } = this.patterns;
    const raw = this.pending.length === 0 ? text : this.pending + text;
    const n = raw.length;
    let node = this.node;
    let i = this.pending.length;
    let unitsUntil = 0;
    this.work += n - i;
    while (i < n) {
      if (node === 0) {
        if (i >= unitsUntil) {
          // Past what the last hit of the filter asked to read unit by unit: skip by strides.
          i = skipToStart(raw, i, this.patterns);
          unitsUntil = i + this.patterns.stride;
        }
        if (i === n) break;
        // The root's own table: for the filter's last units, and where its hash collided.
        const next = rootNext[raw.charCodeAt(i)]!;
        if (next === NONE) {
          i++;
          continue;
        }
        node = next;
      } else {
        const code = raw.charCodeAt(i);
        node = oneCode[node] === code ? oneNext[node]! : this.step(node, code);
      }
      i++;
      const length = out[node]!;
      if (length > 0) this.hide(i - length, i);
    }
    this.node = node;
    let final = n - depth[node]!;
    const high = raw.charCodeAt(final - 1);
    if (final > 0 && final < n && high >= 0xd800 && high <= 0xdbff) final--;
    return this.takeCarry() + this.emit(raw, final);
  }

  /** The stream ended: what was held, its values hidden, the rest as written. */
  end(): string {
    const rest = this.takeCarry() + this.emit(this.pending, this.pending.length);
    this.node = 0;
    this.runs = [];
    this.headOut = false;
    return rest;
  }

  /** The stream was cut here (a cap): what was held may be a value's start, so it is hidden whole. */
  cut(): string {
    if (this.pending.length > 0) this.hide(0, this.pending.length);
    return this.end();
  }

  private step(from: number, code: number): number {
    const { fail } = this.patterns;
    let node = from;
    for (;;) {
      const next = this.patterns.child(node, code);
      if (next !== NONE) return next;
      if (node === 0) return 0;
      node = fail[node]!;
      this.work++;
    }
  }

  /** [start, end) of the pending text is an occurrence: it joins the stretches it overlaps or touches. */
  private hide(start: number, end: number): void {
    const runs = this.runs;
    let from = start;
    while (runs.length > 0 && runs[runs.length - 1]! >= from) {
      from = Math.min(from, runs[runs.length - 2]!);
      runs.length -= 2;
    }
    runs.push(from, end);
  }

  /** Emits `raw` up to `final` with its hidden stretches as `***`; keeps the rest pending. */
  private emit(raw: string, final: number): string {
    const runs = this.runs;
    let text = '';
    let at = 0;
    let r = 0;
    for (; r < runs.length && runs[r]! < final; r += 2) {
      text += raw.slice(at, runs[r]);
      if (!(r === 0 && this.headOut)) text += REDACTED;
      at = runs[r + 1]!;
    }
    if (at < final) text += raw.slice(at, final);
    // A stretch that reaches the cut (or ends right at it) goes on as the head: its `***` is out.
    const head = r > 0 ? at >= final : this.headOut;
    const rest: number[] = r > 0 && head ? [0, at - final] : [];
    for (; r < runs.length; r++) rest.push(runs[r]! - final);
    this.runs = rest;
    this.headOut = head;
    this.pending = raw.slice(final);
    return text;
  }

  private takeCarry(): string {
    const carry = this.carry;
    this.carry = '';
    return carry;
  }
}

/**
 * From `from`, by strides: the first `from + k·stride` whose stride may hold a value's start (the
 * filter has the q-gram at the stride's last position), or where a stride no longer fits in the
 * text. Every position skipped starts no value, so the automaton stays at its root over them.
 */
function skipToStart(raw: string, from: number, patterns: RedactionPatterns): number {
  const { q, stride, grams } = patterns;
  const last = raw.length - q - stride + 1;
  let i = from;
  while (i <= last && grams[gramHash(raw, i + stride - 1, q)] === 0) i += stride;
  return i;
}
