/** No transition (a goto miss) in the automaton's tables; no value (an empty bucket's end). */
const NONE = -1;

/** Values worth redacting: distinct and non-empty (the caller passes each secret and each joined value). */
export function redactionValues(values: Iterable<string>): string[] {
  return [...new Set([...values].filter((v) => v.length > 0))].sort((a, b) => b.length - a.length);
}

/**
 * An attempt's secret values, compiled once for the redaction (issue 27 item 3, ADR 0050). Pure
 * data, no I/O: the worker and the control plane share it. Two parts:
 *
 * - built at once (a few milliseconds for 512 values, tables sized to the values): a q-gram filter
 *   that skips text where no value can start (`stride`), and the values bucketed by a hash of their
 *   first `q` code units, so that a position the filter leaves is checked against the few values
 *   that may start there, mostly with native comparisons;
 * - built on first use only (`automaton()`): an Aho–Corasick automaton over UTF-16 code units, which
 *   the redactor falls back to when a text holds more candidates than its comparison budget allows
 *   (text full of near-matches): one goto per code unit plus failure hops that never outnumber the
 *   gotos, whatever the number of values or matches.
 */
export class RedactionPatterns {
  /** The longest value's length in code units (0 without values). */
  readonly maxLength: number;
  readonly values: readonly string[];
  /**
   * The start filter: `q` code units (at most 4, at most the shortest value) hashed into `grams`,
   * which holds every value's q-grams at offsets 0 … stride − 1, where `stride` is the shortest
   * value's length less q plus one (at most 64). Any occurrence covers each of `stride` consecutive
   * positions with one of those q-grams, so one position in `stride` whose q-gram is not in the
   * table clears the `stride` positions up to it of any value's start. Each entry is a mask of the
   * offsets its q-grams have (bit o >> spread: some value has one at offset o), so a q-gram found
   * at position j names the few positions j − o where a value may start.
   */
  readonly q: number;
  readonly stride: number;
  /** 1 when one bit of a mask stands for two offsets (a stride longer than 32), else 0. */
  readonly spread: number;
  readonly grams: Uint32Array;
  /** `gramHash`'s shift: 32 less the bits of `grams`' index (about 8 entries per q-gram, 2^18 at most). */
  readonly gramShift: number;
  /** Values by the hash of their first q code units: the first index per bucket, then a chain. */
  readonly startHead: Int32Array;
  readonly startNext: Int32Array;
  /** `startHash`'s shift (about 8 buckets per value, 2^16 at most). */
  readonly startShift: number;
  /** Every value's starts shorter than q: what the last units of a piece may begin. */
  readonly shortStarts = new Set<string>();
  private built: Automaton | null = null;

  constructor(values: Iterable<string>) {
    this.values = redactionValues(values);
    this.maxLength = this.values[0]?.length ?? 0;
    const shortest = this.values[this.values.length - 1]?.length ?? 1;
    this.q = Math.min(4, shortest);
    this.stride = Math.min(MAX_STRIDE, shortest - this.q + 1);
    this.spread = this.stride > 32 ? 1 : 0;
    this.gramShift = 32 - tableBits(this.values.length * this.stride, GRAM_BITS);
    this.grams = new Uint32Array(1 << (32 - this.gramShift));
    this.startShift = 32 - tableBits(this.values.length, START_BITS);
    this.startHead = new Int32Array(1 << (32 - this.startShift)).fill(NONE);
    this.startNext = new Int32Array(this.values.length);
    this.values.forEach((value, v) => {
      for (let at = 0; at < this.stride; at++)
        this.grams[gramHash(value, at, this.q, this.gramShift)]! |= 1 << (at >> this.spread);
      const bucket = gramHash(value, 0, this.q, this.startShift);
      this.startNext[v] = this.startHead[bucket]!;
      this.startHead[bucket] = v;
      for (let length = 1; length < this.q; length++) this.shortStarts.add(value.slice(0, length));
    });
  }

  /**
   * What the patterns may weigh, in units of about 24 bytes: the automaton's nodes (one per code
   * unit of the values at most, whether built yet or not) and the tables (each counted as such).
   */
  get size(): number {
    const units = this.values.reduce((n, v) => n + v.length, 1);
    return units + (4 * this.grams.length + 4 * this.startHead.length + 4 * 0x10000) / 24;
  }

  get empty(): boolean {
    return this.values.length === 0;
  }

  /** Whether the automaton has been built (a text needed it). */
  get automatonBuilt(): boolean {
    return this.built !== null;
  }

  /** The Aho–Corasick automaton of the values, built on first use. */
  automaton(): Automaton {
    return (this.built ??= new Automaton(this.values));
  }
}

/**
 * The values' Aho–Corasick automaton in flat arrays (24 bytes a node), its nodes numbered depth
 * first (0 the root) so that a value's path is consecutive and the walk along it reads memory in
 * order. Per node: the child to try first (the one with the most of the values' units below it:
 * mostly the only one; 0: none) and its code unit (NONE: none), the failure link, the depth, the
 * longest value that ends there (0: none), and for a node with several children where their list
 * is in `moreCode`/`moreNext` (its count first, then the children in order of their unit; 0:
 * none). The root's children are one dense table.
 */
export class Automaton {
  /** The root's goto for every code unit: NONE where no value starts with it. */
  readonly rootNext = new Int32Array(0x10000).fill(NONE);
  readonly first: Int32Array;
  readonly firstCode: Int32Array;
  readonly fail: Int32Array;
  readonly depths: Int32Array;
  readonly out: Int32Array;
  readonly more: Int32Array;
  moreCode = new Int32Array(0);
  moreNext = new Int32Array(0);
  /** Failure links followed by `advance` so far (a redactor counts its work from it). */
  hops = 0;

  constructor(values: readonly string[]) {
    const size = 1 + values.reduce((n, v) => n + v.length, 0);
    this.first = new Int32Array(size);
    this.firstCode = new Int32Array(size).fill(NONE);
    this.fail = new Int32Array(size);
    this.depths = new Int32Array(size);
    this.out = new Int32Array(size);
    this.more = new Int32Array(size);
    this.build([...values].sort());
  }

  /**
   * Where the automaton goes from `node` (not the root) on code unit `code`: the child it tries
   * first (most nodes have no other), else the goto of the node or of its failure links in turn.
   */
  advance(node: number, code: number): number {
    if (this.firstCode[node] === code) return this.first[node]!;
    for (let f = node; ;) {
      const next = this.child(f, code);
      if (next !== NONE) return next;
      if (f === 0) return 0;
      f = this.fail[f]!;
      this.hops++;
    }
  }

  /** The goto of `node` on code unit `code`, NONE when the trie has no such edge. */
  child(node: number, code: number): number {
    if (node === 0) return this.rootNext[code]!;
    if (this.firstCode[node] === code) return this.first[node]!;
    const list = this.more[node]!;
    if (list === 0) return NONE;
    // The list in order of unit: halves while it is long, then one by one.
    const codes = this.moreCode;
    let lo = list + 1;
    let hi = lo + codes[list]!;
    while (hi - lo > 4) {
      const mid = (lo + hi) >> 1;
      if (codes[mid]! <= code) lo = mid;
      else hi = mid;
    }
    for (; lo < hi; lo++) if (codes[lo] === code) return this.moreNext[lo]!;
    return NONE;
  }

  /**
   * The trie, its failure links and outputs, one depth at a time: each node at depth d stands for
   * the sorted values' range that shares its d units (`level`: node, from, to); its children split
   * that range by the unit at d. A node's failure link is shallower than it, so it and its children
   * (all made at earlier depths) are there when the node is made. Numbers depth first: the value
   * at k brings the nodes below its longest common start with the value before it (`lcp`), one
   * after the other from `base`.
   */
  private build(sorted: readonly string[]): void {
    const { first, firstCode, fail, depths, out, rootNext } = this;
    const lengths = Int32Array.from(sorted, (v) => v.length);
    // Code units of the values before each: a range's weight, to pick the child the walk tries first.
    const before = new Float64Array(sorted.length + 1);
    for (let k = 0; k < sorted.length; k++) before[k + 1] = before[k]! + lengths[k]!;
    const base = new Int32Array(sorted.length);
    const lcp = new Int32Array(sorted.length);
    let branches = 0;
    for (let k = 0, next = 1; k < sorted.length; k++) {
      if (k > 0) {
        const a = sorted[k - 1]!;
        const b = sorted[k]!;
        let l = 0;
        while (l < a.length && a.charCodeAt(l) === b.charCodeAt(l)) l++;
        lcp[k] = l;
        if (l > 0) branches++; // at most one more child below the root per value
      }
      base[k] = next;
      next += lengths[k]! - lcp[k]!;
    }
    this.moreCode = new Int32Array(3 * branches + 1); // slot 0 unused: 0 in `more` is none
    this.moreNext = new Int32Array(this.moreCode.length);
    let more = 1;
    let level = new Int32Array(3 * sorted.length + 3);
    let below = new Int32Array(level.length);
    level[2] = sorted.length; // the root: all of them
    let groups = 1;
    for (let d = 0; groups > 0; d++) {
      let made = 0;
      for (let g = 0; g < 3 * groups; g += 3) {
        const node = level[g]!;
        const to = level[g + 2]!;
        let from = level[g + 1]!;
        while (from < to && lengths[from] === d) from++; // values that end at `node` sort first
        if (from === to) continue;
        const several = node !== 0 && sorted[from]!.charCodeAt(d) !== sorted[to - 1]!.charCodeAt(d);
        const list = more;
        if (several) this.more[node] = more++;
        let heaviest = -1;
        while (from < to) {
          const code = sorted[from]!.charCodeAt(d);
          let end = from + 1;
          while (end < to && sorted[end]!.charCodeAt(d) === code) end++;
          const next = base[from]! + d - lcp[from]!;
          if (before[end]! - before[from]! > heaviest) {
            heaviest = before[end]! - before[from]!;
            first[node] = next;
            firstCode[node] = code;
          }
          if (several) {
            this.moreCode[more] = code;
            this.moreNext[more++] = next;
          }
          depths[next] = d + 1;
          if (node === 0) rootNext[code] = next;
          else fail[next] = this.failOf(node, code);
          out[next] = lengths[from] === d + 1 ? d + 1 : out[fail[next]!]!;
          below[3 * made] = next;
          below[3 * made + 1] = from;
          below[3 * made++ + 2] = end;
          from = end;
        }
        if (several) this.moreCode[list] = more - list - 1;
      }
      [level, below] = [below, level];
      groups = made;
    }
  }

  /** Where the failure link of `node`'s child on `code` points. */
  private failOf(node: number, code: number): number {
    for (let f = this.fail[node]!; ; f = this.fail[f]!) {
      const to = this.child(f, code);
      if (to !== NONE) return to;
      if (f === 0) return 0;
    }
  }
}

/** The filter's longest stride (two offsets to a bit of the 32-bit masks beyond 32). */
const MAX_STRIDE = 64;
/** The most bits of the start filter's index (a table of 1 MiB at most). */
const GRAM_BITS = 18;
/** The most bits of the values' start buckets (a table of 256 KiB at most). */
const START_BITS = 16;

/** Bits of a table's index for `entries` entries: about 8 slots per entry, from 4 to `most`. */
function tableBits(entries: number, most: number): number {
  return Math.max(4, Math.min(most, 32 - Math.clz32(entries * 8)));
}

/** The hash of `q` (1 to 4) code units of `text` at `at`, in the 32 − `shift` bits of a table's index. */
export function gramHash(text: string, at: number, q: number, shift: number): number {
  let h = 0x811c9dc5;
  for (let i = at; i < at + q; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  return h >>> shift;
}
