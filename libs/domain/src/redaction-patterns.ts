/** No transition (a goto miss) in the automaton's tables; no value (an empty bucket's end). */
export const NONE = -1;

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
   * What the patterns may weigh, in units of about 20 bytes: the automaton's nodes (one per code
   * unit of the values, whether built yet or not) and the tables (each counted as such).
   */
  get size(): number {
    const units = this.values.reduce((n, v) => n + v.length, 1);
    return units + (4 * this.grams.length + 4 * this.startHead.length + 4 * 0x10000) / 20;
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
 * The values' Aho–Corasick automaton. Nodes are numbered from 0 (the root) in flat arrays; a node's
 * first child sits in `oneCode`/`oneNext`, further children (rare below the root) in a Map; the
 * root's children are one dense table.
 */
export class Automaton {
  /** The root's goto for every code unit: NONE where no value starts with it. */
  readonly rootNext = new Int32Array(0x10000).fill(NONE);
  readonly oneCode: Int32Array;
  readonly oneNext: Int32Array;
  /** Per node: 1 when it has children beyond its first (they are in `many`). */
  readonly branches: Uint8Array;
  private readonly many = new Map<number, Map<number, number>>();
  /** Per node: its failure link, its depth, and the longest value that ends there (0: none). */
  readonly fail: Int32Array;
  readonly depth: Int32Array;
  readonly out: Int32Array;

  constructor(private readonly values: readonly string[]) {
    const size = 1 + values.reduce((n, v) => n + v.length, 0);
    this.oneCode = new Int32Array(size).fill(NONE);
    this.oneNext = new Int32Array(size).fill(NONE);
    this.branches = new Uint8Array(size);
    this.fail = new Int32Array(size);
    this.depth = new Int32Array(size);
    this.out = new Int32Array(size);
    this.buildLinks(this.buildTrie());
  }

  /** The goto of `node` on code unit `code`, NONE when the trie has no such edge. */
  child(node: number, code: number): number {
    if (node === 0) return this.rootNext[code]!;
    if (this.oneCode[node] === code) return this.oneNext[node]!;
    if (this.branches[node] === 0) return NONE;
    const next = this.many.get(node)!.get(code);
    return next === undefined ? NONE : next;
  }

  /** The trie of every value; answers how many nodes it made. */
  private buildTrie(): number {
    let nodes = 1;
    const terminal = new Uint8Array(this.fail.length);
    for (const value of this.values) {
      let node = 0;
      for (let i = 0; i < value.length; i++) {
        const code = value.charCodeAt(i);
        let next = this.child(node, code);
        if (next === NONE) {
          next = nodes++;
          this.depth[next] = this.depth[node]! + 1;
          this.addChild(node, code, next);
        }
        node = next;
      }
      terminal[node] = 1;
    }
    for (let node = 1; node < nodes; node++) if (terminal[node]) this.out[node] = this.depth[node]!;
    return nodes;
  }

  private addChild(node: number, code: number, next: number): void {
    if (node === 0) this.rootNext[code] = next;
    else if (this.oneCode[node] === NONE) {
      this.oneCode[node] = code;
      this.oneNext[node] = next;
    } else {
      let more = this.many.get(node);
      if (!more) this.many.set(node, (more = new Map()));
      this.branches[node] = 1;
      more.set(code, next);
    }
  }

  /** Failure links and outputs, breadth first (a link always points to a shallower node). */
  private buildLinks(nodes: number): void {
    const queue = new Int32Array(nodes);
    let tail = 0;
    for (let code = 0; code < 0x10000; code++) {
      const next = this.rootNext[code]!;
      if (next !== NONE) queue[tail++] = next; // depth 1: fail is the root, out is its own
    }
    for (let head = 0; head < tail; head++) {
      const node = queue[head]!;
      const code = this.oneCode[node]!;
      if (code === NONE) continue;
      queue[tail++] = this.link(node, code, this.oneNext[node]!);
      if (this.branches[node] === 1)
        for (const [more, next] of this.many.get(node)!) queue[tail++] = this.link(node, more, next);
    }
  }

  /** The failure link and output of `next`, the child of `node` on `code`; answers `next`. */
  private link(node: number, code: number, next: number): number {
    let f = this.fail[node]!;
    let to = this.child(f, code);
    while (to === NONE && f !== 0) {
      f = this.fail[f]!;
      to = this.child(f, code);
    }
    this.fail[next] = to === NONE ? 0 : to;
    if (this.out[next] === 0) this.out[next] = this.out[this.fail[next]!]!;
    return next;
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
