import { RedactionPatterns, gramHash } from './redaction-patterns';

export { RedactionPatterns, redactionValues } from './redaction-patterns';

/** What a secret value becomes in a run's output (issue 19 item 7, ADR 0050). */
export const REDACTED = '***';

/**
 * Code units of native comparison a write may spend per code unit it searches before it goes on with
 * the automaton: the bound that keeps text full of near-matches linear.
 */
export const COMPARE_BUDGET = 4;

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

/** Where a search of the comparisons stopped: the end, a held start, or the end of their budget. */
const DONE = 0;
const HOLD = 1;
const SPENT = 2;

/**
 * Redaction of one stream of text that arrives in pieces (issue 19 item 7, issue 27): a value split
 * between two pieces is still found, and every code unit that belongs to any occurrence of any value
 * is hidden (overlapping values too); each stretch of hidden units becomes one `***`. `write`
 * returns what is final now and holds back only the end of the stream that is the start of some
 * value (never half a surrogate pair); `end` returns the rest as it is, `cut` hides it (the output
 * was cut there, so what is held may be a value's start).
 *
 * How (issue 27 item 3): the q-gram filter skips by strides to the positions where a value may
 * start; each is checked against the values of its start bucket, the first units in JS and the rest
 * natively (a slice's equality, a memory compare), each comparison charged its length to a budget of
 * `COMPARE_BUDGET` code units per code unit searched. A write whose candidates would spend more (text
 * full of near-matches) goes on from there with the values' Aho–Corasick automaton, built on first
 * need, and so does a write shorter than what the comparisons held (the automaton then carries its
 * state, so held text is not searched again and again). A write costs at most COMPARE_BUDGET + 2
 * units of `work` per code unit it searches (the piece and what was held), whatever the values.
 */
export class StreamRedactor {
  private readonly patterns: RedactionPatterns;
  /** The automaton's state after `pending` (0: its root, or the comparisons held `pending` back). */
  private node = 0;
  private pending = '';
  /** How much of `pending` was searched (0 after the comparisons held it: it is searched again). */
  private scanned = 0;
  /** Hidden stretches over `pending`, flat [start, end) pairs in order; the first may already be out. */
  private runs: number[] = [];
  private headOut = false;
  /** Text a `resume` found final, emitted with the next write. */
  private carry = '';
  /** Code units of comparison the current search may still spend. */
  private budget = 0;
  /** Where the comparisons held the text back (a value may start there and go on in the next piece). */
  private holdAt = 0;
  /** Why the last comparisons stopped. */
  private stop = DONE;
  /**
   * Work done so far, in code units: one per unit searched (skipped by the filter, compared at its
   * start, or an automaton goto), plus the length of each comparison, plus the automaton's failure hops.
   */
  work = 0;

  /**
   * `compareBudget`: code units of comparison per code unit searched (0: the automaton only, as the
   * bench's `automaton` variant and the tests of that path use it).
   */
  constructor(
    values: Iterable<string> | RedactionPatterns,
    private readonly compareBudget = COMPARE_BUDGET,
  ) {
    this.patterns = values instanceof RedactionPatterns ? values : new RedactionPatterns(values);
  }

  /** A redactor that goes on from what another one held (the control plane's stored tail). */
  static resume(patterns: RedactionPatterns, held: HeldOutput, compareBudget?: number): StreamRedactor {
    const redactor = new StreamRedactor(patterns, compareBudget);
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
    const raw = this.pending.length === 0 ? text : this.pending + text;
    const n = raw.length;
    // What the comparisons held is searched again with the new text; when it is the longer of the
    // two (a value arriving in small pieces), the automaton takes it over once and carries its state,
    // so that no text is searched again and again.
    const held = this.search(
      raw,
      this.scanned,
      false,
      this.scanned === 0 && this.pending.length > text.length,
    );
    let final = held ? this.holdAt : n - this.depth();
    const high = raw.charCodeAt(final - 1);
    if (final > 0 && final < n && high >= 0xd800 && high <= 0xdbff) final--;
    const out = this.takeCarry() + this.emit(raw, final);
    this.scanned = held ? 0 : this.pending.length;
    return out;
  }

  /** The stream ended: what was held, its values hidden, the rest as written. */
  end(): string {
    if (this.active && this.scanned < this.pending.length)
      this.search(this.pending, this.scanned, true, false);
    const rest = this.takeCarry() + this.emit(this.pending, this.pending.length);
    this.node = 0;
    this.scanned = 0;
    this.runs = [];
    this.headOut = false;
    return rest;
  }

  /** The stream was cut here (a cap): what was held may be a value's start, so it is hidden whole. */
  cut(): string {
    if (this.pending.length > 0) this.hide(0, this.pending.length);
    this.scanned = this.pending.length;
    return this.end();
  }

  /**
   * Finds the occurrences in `raw` from `from` (the automaton in `node` there). Answers true when the
   * comparisons held the text back from `holdAt`, false when `node` is the state at the end (`last`:
   * the stream ends there, nothing is held). `automaton`: it starts there even at its root.
   */
  private search(raw: string, from: number, last: boolean, automaton: boolean): boolean {
    const n = raw.length;
    let i = from;
    this.work += n - i;
    this.budget = this.compareBudget * (n - i);
    // The automaton of an earlier piece goes on until it is back at its root.
    if (this.node !== 0 || automaton) i = this.walk(raw, i, true);
    if (i === n) return false;
    i = this.compare(raw, i, last);
    if (this.stop === HOLD) {
      this.holdAt = i;
      return true;
    }
    if (this.stop === SPENT) this.walk(raw, i, false);
    return false;
  }

  /**
   * The comparisons from `from` (the automaton at its root), in order of position: answers where
   * they stopped, and why in `stop` (DONE: at the end; HOLD: a value may start there and go on past
   * the end; SPENT: their budget ran out there).
   */
  private compare(raw: string, from: number, last: boolean): number {
    const { q, stride, grams, gramShift, spread } = this.patterns;
    const n = raw.length;
    const lastStride = n - q - stride + 1;
    let i = from;
    for (; i <= lastStride; i += stride) {
      // The q-gram at the stride's last position: none of the values' (most strides), or the offsets
      // it has in them, which name the positions where one may start.
      const end = i + stride - 1;
      let mask = grams[gramHash(raw, end, q, gramShift)]!;
      for (; mask !== 0; mask ^= 1 << (31 - Math.clz32(mask))) {
        const offset = (31 - Math.clz32(mask)) << spread;
        for (let at = Math.max(i, end - offset - (1 << spread) + 1); at <= end - offset; at++)
          if ((this.stop = this.startsAt(raw, at, last)) !== DONE) return at;
      }
    }
    // The last units, where a stride no longer fits: each position in turn.
    for (; i < n; i++) if ((this.stop = this.startsAt(raw, i, last)) !== DONE) return i;
    return n;
  }

  /** Checks the values that may start at `at` and hides those that do. */
  private startsAt(raw: string, at: number, last: boolean): number {
    const { q, values, startHead, startNext, startShift } = this.patterns;
    const room = raw.length - at;
    if (room < q) {
      // Too short for any value: held when it may start one (never at the stream's end).
      return !last && this.patterns.shortStarts.has(raw.slice(at)) ? HOLD : DONE;
    }
    for (let v = startHead[gramHash(raw, at, q, startShift)]!; v >= 0; v = startNext[v]!) {
      const value = values[v]!;
      const length = value.length <= room ? value.length : room;
      if (length > this.budget) return SPENT;
      // The first units in JS (most candidates end there), then the rest natively.
      let k = 0;
      const head = length < 8 ? length : 8;
      while (k < head && raw.charCodeAt(at + k) === value.charCodeAt(k)) k++;
      const cost = k < head ? k + 1 : length;
      this.budget -= cost;
      this.work += cost;
      if (k < head) continue;
      // Equality of a slice is a native memory comparison (startsWith walks the units one by one).
      if (length === value.length) {
        if (length > head && raw.slice(at, at + length) !== value) continue;
        this.hide(at, at + length);
      } else if (!last && (length === head || raw.slice(at) === value.slice(0, length))) {
        return HOLD; // the piece ends inside what may be this value
      }
    }
    return DONE;
  }

  /**
   * The automaton from `from` in `node`: to the end, or (`toRoot`) until it is back at its root
   * past `from`. Answers where it stopped.
   */
  private walk(raw: string, from: number, toRoot: boolean): number {
    const a = this.patterns.automaton();
    const { rootNext, first, firstCode, out } = a;
    const hops = a.hops;
    const n = raw.length;
    let node = this.node;
    let i = from;
    let unitsUntil = 0;
    while (i < n) {
      if (node === 0) {
        if (toRoot && i !== from) break;
        if (i >= unitsUntil) {
          // Past what the last hit of the filter asked to read unit by unit: skip by strides.
          i = skipToStart(raw, i, this.patterns);
          unitsUntil = i + this.patterns.stride;
        }
        if (i === n) break;
        // The root's own table: for the filter's last units, and where its hash collided.
        const next = rootNext[raw.charCodeAt(i)]!;
        if (next < 0) {
          i++;
          continue;
        }
        node = next;
      } else {
        // Most nodes below the root have one child, the one they try first.
        const code = raw.charCodeAt(i);
        node = firstCode[node] === code ? first[node]! : a.advance(node, code);
      }
      i++;
      const length = out[node]!;
      if (length > 0) this.hide(i - length, i);
    }
    this.node = node;
    this.work += a.hops - hops;
    return i;
  }

  /** The automaton's depth after `pending` (0 at its root). */
  private depth(): number {
    return this.node === 0 ? 0 : this.patterns.automaton().depths[this.node]!;
  }

  /**
   * [start, end) of the pending text is an occurrence: it joins the stretches it overlaps or touches.
   * Occurrences come in order of their ends (the automaton) or of their starts (the comparisons, and
   * the automaton after them from where they stopped), so no stretch lies wholly after a new one.
   */
  private hide(start: number, end: number): void {
    const runs = this.runs;
    let from = start;
    let to = end;
    while (runs.length > 0 && runs[runs.length - 1]! >= from) {
      from = Math.min(from, runs[runs.length - 2]!);
      to = Math.max(to, runs[runs.length - 1]!);
      runs.length -= 2;
    }
    runs.push(from, to);
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
  const { q, stride, grams, gramShift } = patterns;
  const last = raw.length - q - stride + 1;
  let i = from;
  while (i <= last && grams[gramHash(raw, i + stride - 1, q, gramShift)] === 0) i += stride;
  return i;
}
