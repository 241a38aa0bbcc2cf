/** No transition (a goto miss) in the automaton's tables. */
export const NONE = -1;

/** Values worth redacting: distinct and non-empty (the caller passes each secret and each joined value). */
export function redactionValues(values: Iterable<string>): string[] {
  return [...new Set([...values].filter((v) => v.length > 0))].sort((a, b) => b.length - a.length);
}

/**
 * An attempt's secret values compiled once into an Aho–Corasick automaton over UTF-16 code units
 * (issue 27 item 3, ADR 0050): scanning a text costs one goto per code unit plus failure hops that
 * never outnumber the gotos, whatever the number of values or matches. Pure data, no I/O: the worker
 * and the control plane share it. Nodes are numbered from 0 (the root) in flat arrays; a node's first
 * child sits in `oneCode`/`oneNext`, further children (rare below the root) in a Map; the root's
 * children are one dense table, and a q-gram filter skips text where no value can start (`stride`).
 */
export class RedactionPatterns {
  /** The longest value's length in code units (0 without values). */
  readonly maxLength: number;
  readonly values: readonly string[];
  /** The root's goto for every code unit: NONE where no value starts with it. */
  readonly rootNext = new Int32Array(0x10000).fill(NONE);
  readonly oneCode: Int32Array;
  readonly oneNext: Int32Array;
  /** Per node: 1 when it has children beyond its first (they are in `many`). */
  readonly branches: Uint8Array;
  private readonly many = new Map<number, Map<number, number>>();
  /**
   * The start filter: `q` code units (at most 4, at most the shortest value) hashed into `grams`,
   * which holds every value's q-grams at offsets 0 … stride − 1, where `stride` is the shortest
   * value's length (at most 32) less q plus one. Any occurrence covers each of `stride` consecutive
   * positions with one of those q-grams, so one position in `stride` whose q-gram is not in the
   * table clears the `stride` positions up to it of any value's start.
   */
  readonly q: number;
  readonly stride: number;
  readonly grams = new Uint8Array(1 << GRAM_BITS);
  /** Per node: its failure link, its depth, and the longest value that ends there (0: none). */
  readonly fail: Int32Array;
  readonly depth: Int32Array;
  readonly out: Int32Array;

  constructor(values: Iterable<string>) {
    this.values = redactionValues(values);
    this.maxLength = this.values[0]?.length ?? 0;
    const size = 1 + this.values.reduce((n, v) => n + v.length, 0);
    this.oneCode = new Int32Array(size).fill(NONE);
    this.oneNext = new Int32Array(size).fill(NONE);
    this.branches = new Uint8Array(size);
    this.fail = new Int32Array(size);
    this.depth = new Int32Array(size);
    this.out = new Int32Array(size);
    const nodes = this.buildTrie();
    this.buildLinks(nodes);
    const shortest = Math.min(32, this.values[this.values.length - 1]?.length ?? 1);
    this.q = Math.min(4, shortest);
    this.stride = shortest - this.q + 1;
    for (const value of this.values)
      for (let at = 0; at < this.stride; at++) this.grams[gramHash(value, at, this.q)] = 1;
  }

  /** What the automaton weighs, in nodes of about 20 bytes (its two 256 KiB tables counted as such too). */
  get size(): number {
    return this.fail.length + ((1 << GRAM_BITS) + 4 * 0x10000) / 20;
  }

  get empty(): boolean {
    return this.values.length === 0;
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
      this.forEachChild(node, (code, next) => {
        let f = this.fail[node]!;
        let to = this.child(f, code);
        while (to === NONE && f !== 0) {
          f = this.fail[f]!;
          to = this.child(f, code);
        }
        this.fail[next] = to === NONE ? 0 : to;
        if (this.out[next] === 0) this.out[next] = this.out[this.fail[next]!]!;
        queue[tail++] = next;
      });
    }
  }

  private forEachChild(node: number, visit: (code: number, next: number) => void): void {
    if (this.oneCode[node] === NONE) return;
    visit(this.oneCode[node]!, this.oneNext[node]!);
    for (const [code, next] of this.many.get(node) ?? []) visit(code, next);
  }
}

/** Bits of the start filter's hash (a 256 KiB table per automaton). */
const GRAM_BITS = 18;

/** The start filter's hash of `q` (1 to 4) code units of `text` at `at`. */
export function gramHash(text: string, at: number, q: number): number {
  let h = 0x811c9dc5;
  for (let i = at; i < at + q; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  return h >>> (32 - GRAM_BITS);
}
