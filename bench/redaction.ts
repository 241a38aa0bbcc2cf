/**
 * `npm run bench -- redaction` (issue 27 item 3, ADR 0050): what the shared redactor costs on 1 MiB of
 * output in 60 KiB chunks with 512 secret values of 64 bytes to 4 KiB, beside a plain copy of the same
 * chunks in the same run (each chunk encoded to UTF-8 with `Buffer.from`, what storing or sending it
 * costs at least). Rounds alternate the variants (order rotating); medians of CPU time per MiB. The
 * text is log lines in the values' alphabet, dense with values: a value's first half (which a
 * redactor must follow, then let go) or a whole value on one line in 25 or so. Beside it: the same
 * text through the automaton alone (the fallback's cost), and a text full of near-matches (512
 * values that share long runs of one letter, a text of such runs) that makes the comparisons give
 * way to the automaton. Building the patterns (at an attempt's start) and the automaton (when a text
 * first needs it) are timed apart, each the first of its kind in the process (code not yet optimized).
 */
import { performance } from 'node:perf_hooks';
import { RedactionPatterns, StreamRedactor } from '@ql/domain';
import { envNumber, median } from './lib/measure';
import { Align, machineInfo, markdownTable, textTable } from './lib/report';
import { writeResults } from './lib/results';

const GOAL = 3;
const MIB = 1024 * 1024;
const CHUNK = 60 * 1024;
const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';

/** A deterministic generator: every run measures the same bytes. */
function generator(seed: number): () => number {
  let s = seed;
  // In 32-bit integers: in doubles the product loses its low bits and the sequence falls into a
  // cycle of about 10,000 draws (the bench's 512 values were 39 distinct ones).
  return () => (s = (Math.imul(s, 1103515245) + 12345) & 0x7fffffff) / 2 ** 31;
}

/** A flat string, as `JSON.parse` (control plane), a `StringDecoder` or a decryption (worker) gives it. */
function flat(text: string): string {
  return Buffer.from(text, 'utf8').toString('utf8');
}

export function benchValues(count: number, next = generator(7)): string[] {
  return Array.from({ length: count }, () => {
    const length = 64 + Math.floor(next() * (4096 - 64));
    let value = '';
    for (let i = 0; i < length; i++) value += ALPHABET[Math.floor(next() * ALPHABET.length)];
    return flat(value);
  });
}

/** 1 MiB in 60 KiB chunks, each a flat string of its own. */
function chunked(text: string): string[] {
  const chunks: string[] = [];
  for (let at = 0; at < MIB; at += CHUNK) chunks.push(flat(text.slice(at, Math.min(at + CHUNK, MIB))));
  return chunks;
}

export function benchChunks(values: readonly string[], next = generator(11)): string[] {
  let text = '';
  let line = 0;
  while (text.length < MIB) {
    const word = () => ALPHABET.slice(0, 4 + Math.floor(next() * 20));
    let row = `${String(line).padStart(6, '0')} INFO step ${word()} took ${Math.floor(next() * 999)} ms ${word()}`;
    const value = values[Math.floor(next() * values.length)]!;
    if (line % 200 === 0) row += ` token=${value}`;
    else if (line % 25 === 0) row += ` partial=${value.slice(0, value.length >> 1)}`;
    text += `${row}\n`;
    line++;
  }
  return chunked(text);
}

/**
 * Near-matches: 512 values of 64 to 4096 units, each a run of `a` and four digits; a text of lines
 * that are a value less its last unit, then `x` (each position of a run starts a candidate for every
 * value the run is long enough for), and a whole value every 50 lines.
 */
export function adversarialCase(next = generator(13)): { values: string[]; chunks: string[] } {
  const values = benchValues(512).map((v, i) => flat('a'.repeat(v.length - 4) + String(i).padStart(4, '0')));
  let text = '';
  for (let line = 0; text.length < MIB; line++) {
    const value = values[Math.floor(next() * values.length)]!;
    text += `${line % 50 === 0 ? value : `${value.slice(0, -1)}x`}\n`;
  }
  return { values, chunks: chunked(text) };
}

/** `scan`: a JS loop that reads every code unit and nothing else, what a redactor that reads every unit costs at least. */
type Variant = 'redact' | 'automaton' | 'adversarial' | 'scan' | 'copy';
const VARIANTS: readonly Variant[] = ['redact', 'automaton', 'adversarial', 'scan', 'copy'];

interface Case {
  readonly patterns: RedactionPatterns;
  readonly chunks: readonly string[];
}

/** One attempt's stream: a fresh redactor over the chunks, its output joined (what is checked). */
function redactAll(c: Case, compareBudget?: number): string {
  const redactor = new StreamRedactor(c.patterns, compareBudget);
  return c.chunks.map((chunk) => redactor.write(chunk)).join('') + redactor.end();
}

/** CPU ms of `reps` passes over the chunks (a fresh redactor per pass: one attempt's stream). */
function sample(variant: Variant, main: Case, adversarial: Case, reps: number) {
  let sink = 0;
  const cpu = process.cpuUsage();
  const t = performance.now();
  for (let rep = 0; rep < reps; rep++) {
    if (variant === 'copy') {
      for (const chunk of main.chunks) sink += Buffer.from(chunk, 'utf8').length;
    } else if (variant === 'scan') {
      for (const chunk of main.chunks) for (let i = 0; i < chunk.length; i++) sink += chunk.charCodeAt(i) & 1;
    } else {
      const c = variant === 'adversarial' ? adversarial : main;
      const redactor = new StreamRedactor(c.patterns, variant === 'automaton' ? 0 : undefined);
      for (const chunk of c.chunks) sink += redactor.write(chunk).length;
      sink += redactor.end().length;
    }
  }
  const wallMs = performance.now() - t;
  const used = process.cpuUsage(cpu);
  if (sink === 0) throw new Error('nothing came out');
  return { cpuMs: (used.user + used.system) / 1000 / reps, wallMs: wallMs / reps };
}

/** Milliseconds `build` takes, and what it made. */
function timed<T>(build: () => T): [T, number] {
  const start = performance.now();
  const made = build();
  return [made, performance.now() - start];
}

export async function redactionMain(resultsDir: string): Promise<void> {
  const started = new Date();
  const machine = machineInfo(started);
  const rounds = Math.floor(envNumber('QL_BENCH_ROUNDS', 3, 2)) * 3;
  const reps = Math.floor(envNumber('QL_BENCH_REDACTION_REPS', 20, 1));
  const values = benchValues(512);
  const [patterns, patternsMs] = timed(() => new RedactionPatterns(values));
  const main: Case = { patterns, chunks: benchChunks(values) };
  const near = adversarialCase();
  const adversarial: Case = { patterns: new RedactionPatterns(near.values), chunks: near.chunks };

  // Every variant hides every value; the comparisons needed no automaton, the near-matches did.
  const hidden = (redactAll(main).match(/\*\*\*/g) ?? []).length;
  if (patterns.automatonBuilt) throw new Error('the comparisons built the automaton on ordinary text');
  const [, automatonMs] = timed(() => patterns.automaton());
  for (const [c, out] of [
    [main, redactAll(main)],
    [main, redactAll(main, 0)],
    [adversarial, redactAll(adversarial)],
  ] as const)
    if (c.patterns.values.some((v) => out.includes(v))) throw new Error('a value survived the redaction');
  if (!adversarial.patterns.automatonBuilt) throw new Error('the near-matches did not reach the automaton');

  const samples = Object.fromEntries(VARIANTS.map((v) => [v, [] as { cpuMs: number; wallMs: number }[]]));
  for (const v of VARIANTS) sample(v, main, adversarial, 2); // warm-up: all compiled before anything counts
  for (let round = 0; round < rounds; round++) {
    const order = VARIANTS.map((_v, i) => VARIANTS[(i + round) % VARIANTS.length]!);
    for (const v of order) samples[v]!.push(sample(v, main, adversarial, reps));
  }
  const med = (v: Variant, k: 'cpuMs' | 'wallMs') => median(samples[v]!.map((s) => s[k]))!;
  const ratio = med('redact', 'cpuMs') / med('copy', 'cpuMs');
  const header = ['variant', 'CPU ms per MiB', 'wall ms per MiB', '÷ copy (CPU)', 'goal'];
  const align: Align[] = ['left', 'right', 'right', 'right', 'right'];
  const label: Record<Variant, string> = {
    redact: 'StreamRedactor.write, 512 values',
    automaton: 'the same through the automaton alone (budget 0)',
    adversarial: 'near-matches, 512 values (comparisons, then automaton)',
    scan: 'a JS loop reading every code unit',
    copy: 'copy: Buffer.from of each chunk',
  };
  const rows = VARIANTS.map((v) => [
    label[v],
    med(v, 'cpuMs').toFixed(2),
    med(v, 'wallMs').toFixed(2),
    (med(v, 'cpuMs') / med('copy', 'cpuMs')).toFixed(2),
    v === 'redact' ? `≤ ${GOAL}` : '',
  ]);
  const facts =
    `values: ${new Set(values).size} distinct, ${Math.min(...values.map((v) => v.length))}–${Math.max(...values.map((v) => v.length))} ` +
    `characters (${values.reduce((n, v) => n + v.length, 0)} in all); text: ${main.chunks.length} chunks, ` +
    `1 MiB, ${hidden} stretches hidden; patterns built in ${patternsMs.toFixed(1)} ms at the attempt's ` +
    `start; the automaton (built only when a text needs it; the ordinary text did not) in ` +
    `${automatonMs.toFixed(1)} ms; ratio ${ratio.toFixed(2)} (goal ≤ ${GOAL}: ${ratio <= GOAL ? 'met' : 'NOT met'})`;
  console.log(textTable(header, rows, align));
  console.log(facts);
  writeResults(
    resultsDir,
    'redaction',
    started,
    {
      benchmark: 'redaction',
      goal: GOAL,
      machine,
      rounds,
      reps,
      patternsMs,
      automatonMs,
      hidden,
      ratio,
      samples,
    },
    [
      `# Redaction of 1 MiB with 512 secret values, beside a copy (issue 27 item 3), ${machine.date}`,
      '',
      `Machine: ${machine.cpuCount} CPUs, node ${machine.node}, 1-min load ${machine.loadAvgAtStart} at start.`,
      '',
      `Each sample: ${reps} passes over the same 1 MiB in 60 KiB chunks; variants alternated, order ` +
        `rotating, median of ${rounds} samples. The machine is shared: read the ratio.`,
      '',
      markdownTable(header, rows, align),
      '',
      facts,
      '',
    ],
  );
}
