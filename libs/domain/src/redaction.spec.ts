import { COMPARE_BUDGET, REDACTED, StreamRedactor, redactText } from './redaction';
import { RedactionPatterns } from './redaction-patterns';

/** Every way to cut `text` in two pieces, through one redactor: what comes out. */
function throughCuts(values: string[], text: string): string[] {
  const outs: string[] = [];
  for (let cut = 0; cut <= text.length; cut++) {
    const r = new StreamRedactor(values);
    outs.push(r.write(text.slice(0, cut)) + r.write(text.slice(cut)) + r.end());
  }
  return outs;
}

/** `text` through `redactor` in pieces of `size` code units, then its end: what comes out. */
function inPieces(redactor: StreamRedactor, text: string, size: number): string {
  let out = '';
  for (let at = 0; at < text.length; at += size) out += redactor.write(text.slice(at, at + size));
  return out + redactor.end();
}

/** The rule by its definition: every unit of any occurrence hidden, each hidden stretch one `***`. */
function reference(text: string, values: string[]): string {
  const hidden = new Array<boolean>(text.length).fill(false);
  for (const v of values)
    for (let at = text.indexOf(v); at >= 0; at = text.indexOf(v, at + 1))
      for (let i = at; i < at + v.length; i++) hidden[i] = true;
  let out = '';
  for (let i = 0; i < text.length; i++)
    if (!hidden[i]) out += text[i];
    else if (i === 0 || !hidden[i - 1]) out += REDACTED;
  return out;
}

/**
 * The comparison budgets the random cases run with: the default (comparisons, the automaton only
 * where they would spend too much), none (the automaton only), and one unit per unit (both, switching
 * back and forth within a piece and between pieces).
 */
const BUDGETS = [COMPARE_BUDGET, 0, 1];

/** A small deterministic generator, so a failure names a case that can be run again. */
function random(seed: number): () => number {
  let s = seed;
  // In 32-bit integers: in doubles the product loses its low bits and the sequence falls into a
  // cycle of about 10,000 draws (the bench's 512 values were 39 distinct ones).
  return () => (s = (Math.imul(s, 1103515245) + 12345) & 0x7fffffff) / 2 ** 31;
}

describe('redaction of secret values (ADR 0050)', () => {
  it('replaces every occurrence, the longest value first where they overlap', () => {
    expect(redactText('a=s3cret b=s3cret&t0ken c', ['s3cret', 's3cret&t0ken'])).toBe(
      `a=${REDACTED} b=${REDACTED} c`,
    );
    expect(redactText('nothing here', ['s3cret'])).toBe('nothing here');
    expect(redactText('s3cret', [])).toBe('s3cret');
  });

  it('hides both of two overlapping values, and a value inside another, wherever the text is cut', () => {
    for (const out of throughCuts(['abcdef', 'cdefgh'], '<abcdefgh>')) expect(out).toBe('<***>');
    for (const out of throughCuts(['cdefgh', 'abcdef'], '<abcdef|cdefgh|abcdefgh>'))
      expect(out).toBe('<***|***|***>');
    for (const out of throughCuts(['bc', 'abcd', 'x'], 'abc abcd xbcx')) expect(out).toBe('a*** *** ***');
  });

  it('finds a value split across pieces wherever the cut falls, and loses no other character', () => {
    const text = 'head s3cret-value mid s3cret-value tail';
    for (const out of throughCuts(['s3cret-value'], text)) expect(out).toBe('head *** mid *** tail');
  });

  it('matches the rule’s definition on random texts cut in random pieces', () => {
    const next = random(27);
    const pick = (alphabet: string, n: number) =>
      Array.from({ length: n }, () => alphabet[Math.floor(next() * alphabet.length)]).join('');
    for (let round = 0; round < 600; round++) {
      // Short values (the filter reads every position) and long ones (it skips by strides).
      const long = round % 2 === 1;
      const values = Array.from({ length: 1 + Math.floor(next() * 5) }, () =>
        pick('ab', (long ? 6 : 1) + Math.floor(next() * (long ? 10 : 5))),
      );
      const text = pick(long ? 'aabbbc' : 'abc', Math.floor(next() * (long ? 120 : 40)));
      const patterns = new RedactionPatterns(values);
      const budget = BUDGETS[round % BUDGETS.length]!;
      // One redactor kept in memory (the worker), one resumed from its held tail each piece (the control plane).
      const kept = new StreamRedactor(patterns, budget);
      let resumed = kept;
      let out = '';
      let again = '';
      for (let at = 0; at < text.length;) {
        const size = 1 + Math.floor(next() * 6);
        out += kept.write(text.slice(at, at + size));
        resumed = StreamRedactor.resume(
          patterns,
          resumed === kept ? { text: '', hiddenHead: null } : resumed.held(),
          budget,
        );
        again += resumed.write(text.slice(at, at + size));
        at += size;
      }
      out += kept.end();
      again += resumed.end();
      const expected = reference(text, values);
      expect({ values, budget, text, out, again }).toEqual({
        values,
        budget,
        text,
        out: expected,
        again: expected,
      });
    }
  });

  it('matches the rule’s definition where the text follows long values part of the way, in random pieces', () => {
    const next = random(91);
    const pick = (n: number) => Array.from({ length: n }, () => (next() < 0.5 ? 'a' : 'b')).join('');
    for (let round = 0; round < 300; round++) {
      // From 16 units (a stride of 13) to 139 (strides of 33 to 64: two offsets to a bit of the filter).
      const values = Array.from({ length: 1 + Math.floor(next() * 4) }, () =>
        pick((round % 2 === 0 ? 16 : 36) + Math.floor(next() * (round % 2 === 0 ? 60 : 104))),
      );
      let text = '';
      while (text.length < 400) {
        const value = values[Math.floor(next() * values.length)]!;
        const r = next();
        // A whole value, a value's start cut anywhere, or a few other units.
        text += r < 0.3 ? value : r < 0.8 ? value.slice(0, Math.floor(next() * value.length)) : pick(3) + 'c';
      }
      const patterns = new RedactionPatterns(values);
      const budget = BUDGETS[Math.floor(round / 2) % BUDGETS.length]!;
      const kept = new StreamRedactor(patterns, budget);
      let out = '';
      for (let at = 0; at < text.length;) {
        const size = 1 + Math.floor(next() * 90);
        out += kept.write(text.slice(at, at + size));
        at += size;
      }
      out += kept.end();
      expect({ values, budget, text, out }).toEqual({ values, budget, text, out: reference(text, values) });
    }
  });

  it('matches the rule’s definition where values branch many ways after a common start', () => {
    const next = random(44);
    const letters = 'abcdefghijklmnopqrstuvwxyz0123456789\u00e9\u4e2d\u{1F600}';
    const pick = (n: number) =>
      Array.from({ length: n }, () => [...letters][Math.floor(next() * 39)]).join('');
    for (let round = 0; round < 90; round++) {
      // Nodes with up to 39 children (and surrogate pairs), at the root and below a shared start.
      const stem = pick(Math.floor(next() * 3));
      const values = Array.from({ length: 40 }, () => stem + pick(1 + Math.floor(next() * 3)));
      let text = '';
      while (text.length < 300) text += next() < 0.3 ? values[Math.floor(next() * 40)]! : stem + pick(2);
      const budget = BUDGETS[round % BUDGETS.length]!;
      const out = inPieces(new StreamRedactor(values, budget), text, 1 + Math.floor(next() * 50));
      expect({ values, budget, text, out }).toEqual({ values, budget, text, out: reference(text, values) });
    }
  });

  it('holds back only what may still become a value, and emits the rest at once', () => {
    const r = new StreamRedactor(['abcdef']);
    expect(r.write('0123456789')).toBe('0123456789');
    expect(r.write('xab')).toBe('x');
    expect(r.held()).toEqual({ text: 'ab', hiddenHead: null });
    expect(r.write('cdef!ab')).toBe('***!');
    expect(r.end()).toBe('ab');
  });

  it('a cut hides what was held (it may be a value’s start); an end emits it as written', () => {
    const cut = new StreamRedactor(['s3cret-value']);
    expect(cut.write('x s3cret-val')).toBe('x ');
    expect(cut.cut()).toBe(REDACTED);
    const ended = new StreamRedactor(['s3cret-value']);
    expect(ended.write('x s3cret-val') + ended.end()).toBe('x s3cret-val');
  });

  it('goes on from a held tail as if it had never stopped (the control plane’s stored state)', () => {
    const values = ['abcdef', 'cdefgh', 'defx'];
    const patterns = new RedactionPatterns(values);
    const text = 'zabcdefghq abcdefx cdefgabcdefgh defx';
    for (let cut = 0; cut <= text.length; cut++) {
      const first = new StreamRedactor(patterns);
      const head = first.write(text.slice(0, cut));
      const resumed = StreamRedactor.resume(patterns, first.held());
      expect(head + resumed.write(text.slice(cut)) + resumed.end()).toBe(reference(text, values));
    }
  });

  it('never keeps half a surrogate pair back (no lone surrogate goes out)', () => {
    const r = new StreamRedactor(['\u{1F600}x']);
    const out = r.write('a\u{1F600}');
    expect(out).toBe('a');
    expect(out + r.end()).toBe('a\u{1F600}');
  });

  it('a value that looks like the mask is not matched again in the held tail', () => {
    for (const out of throughCuts(['**'], 'x**y')) expect(out).toBe('x***y');
  });

  it('costs work linear in the text with 512 long values and an adversarial text, whatever it matches', () => {
    // Values that share long prefixes and suffixes, a text that starts and matches many of them.
    const values = Array.from({ length: 512 }, (_v, i) => `${'a'.repeat(64 + (i % 200))}${i.toString(36)}`);
    const text = values.slice(0, 40).join('a').repeat(8) + 'a'.repeat(4096);
    const patterns = new RedactionPatterns(values);
    const r = new StreamRedactor(patterns);
    expect(inPieces(r, text, 1000)).toBe(reference(text, values));
    // Every position a candidate for hundreds of values: the comparisons gave way to the automaton.
    expect(patterns.automatonBuilt).toBe(true);
    // A unit per unit, the comparisons within their budget, failure hops never more than the gotos.
    expect(r.work).toBeLessThanOrEqual((COMPARE_BUDGET + 2) * text.length);
  });

  it('compares where candidates are few, and never builds the automaton for that', () => {
    const next = random(3);
    const pick = (n: number) =>
      Array.from({ length: n }, () => String.fromCharCode(48 + Math.floor(next() * 75))).join('');
    const values = Array.from({ length: 64 }, () => pick(64 + Math.floor(next() * 200)));
    let text = '';
    for (let line = 0; text.length < 200_000; line++)
      text += `${line} step ${pick(30)} ${line % 20 === 0 ? values[line % 64] : pick(40)}\n`;
    const patterns = new RedactionPatterns(values);
    const r = new StreamRedactor(patterns);
    expect(inPieces(r, text, 4000)).toBe(reference(text, values));
    expect(patterns.automatonBuilt).toBe(false);
    expect(r.work).toBeLessThanOrEqual(2 * text.length);
  });

  it('searches what it held once more at most: a long value written a unit at a time stays linear', () => {
    const value = 'k'.repeat(3000) + 'x';
    const text = `<${value.slice(0, 2999)}|${value}>`;
    const r = new StreamRedactor([value]);
    expect(inPieces(r, text, 1)).toBe(`<${value.slice(0, 2999)}|***>`);
    // Searching what was held again with every unit would cost about text² / 2 (18 M here).
    expect(r.work).toBeLessThanOrEqual((COMPARE_BUDGET + 2) * text.length);
  });
});
