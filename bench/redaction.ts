/**
 * `npm run bench -- redaction` (issue 27 item 3, ADR 0050): what the shared redactor costs on 1 MiB of
 * output in 60 KiB chunks with 512 secret values of 64 bytes to 4 KiB, beside a plain copy of the same
 * chunks in the same run (each chunk encoded to UTF-8 with `Buffer.from`, what storing or sending it
 * costs at least). Rounds alternate the two (order rotating); medians of CPU time per MiB. The text is
 * log lines in the values' alphabet, with an occurrence of a value every ~16 KiB and a value's first
 * half (which the automaton must follow, then fall back from) every ~2 KiB. Building the automaton
 * (once per attempt) is timed apart.
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
  return () => (s = (s * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
}

export function benchValues(count: number, next = generator(7)): string[] {
  return Array.from({ length: count }, () => {
    const length = 64 + Math.floor(next() * (4096 - 64));
    let value = '';
    for (let i = 0; i < length; i++) value += ALPHABET[Math.floor(next() * ALPHABET.length)];
    return value;
  });
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
  text = text.slice(0, MIB);
  const chunks: string[] = [];
  // Each chunk a flat string of its own, as JSON.parse (control plane) or a StringDecoder (worker) gives it.
  for (let at = 0; at < text.length; at += CHUNK)
    chunks.push(Buffer.from(text.slice(at, at + CHUNK), 'utf8').toString('utf8'));
  return chunks;
}

/** `scan`: a JS loop that reads every code unit and nothing else, the floor of any redactor written in JS. */
type Variant = 'redact' | 'copy' | 'scan';
const VARIANTS: readonly Variant[] = ['redact', 'scan', 'copy'];

/** CPU ms of `reps` passes over the chunks (a fresh redactor per pass: one attempt's stream). */
function sample(variant: Variant, patterns: RedactionPatterns, chunks: readonly string[], reps: number) {
  let sink = 0;
  const cpu = process.cpuUsage();
  const t = performance.now();
  for (let rep = 0; rep < reps; rep++) {
    if (variant === 'copy') {
      for (const chunk of chunks) sink += Buffer.from(chunk, 'utf8').length;
    } else if (variant === 'scan') {
      for (const chunk of chunks) for (let i = 0; i < chunk.length; i++) sink += chunk.charCodeAt(i) & 1;
    } else {
      const redactor = new StreamRedactor(patterns);
      for (const chunk of chunks) sink += redactor.write(chunk).length;
      sink += redactor.end().length;
    }
  }
  const wallMs = performance.now() - t;
  const used = process.cpuUsage(cpu);
  if (sink === 0) throw new Error('nothing came out');
  return { cpuMs: (used.user + used.system) / 1000 / reps, wallMs: wallMs / reps };
}

export async function redactionMain(resultsDir: string): Promise<void> {
  const started = new Date();
  const machine = machineInfo(started);
  const rounds = Math.floor(envNumber('QL_BENCH_ROUNDS', 3, 2)) * 3;
  const reps = Math.floor(envNumber('QL_BENCH_REDACTION_REPS', 20, 1));
  const values = benchValues(512);
  const chunks = benchChunks(values);
  const buildStart = performance.now();
  const patterns = new RedactionPatterns(values);
  const buildMs = performance.now() - buildStart;
  const check = new StreamRedactor(patterns);
  const redacted = chunks.map((c) => check.write(c)).join('') + check.end();
  const hidden = (redacted.match(/\*\*\*/g) ?? []).length;
  if (values.some((v) => redacted.includes(v))) throw new Error('a value survived the redaction');

  const samples: Record<Variant, { cpuMs: number; wallMs: number }[]> = { redact: [], copy: [], scan: [] };
  for (const v of VARIANTS) sample(v, patterns, chunks, 2); // warm-up: all compiled before anything counts
  for (let round = 0; round < rounds; round++) {
    const order = VARIANTS.map((_v, i) => VARIANTS[(i + round) % VARIANTS.length]!);
    for (const v of order) samples[v].push(sample(v, patterns, chunks, reps));
  }
  const med = (v: Variant, k: 'cpuMs' | 'wallMs') => median(samples[v].map((s) => s[k]))!;
  const ratio = med('redact', 'cpuMs') / med('copy', 'cpuMs');
  const header = ['variant', 'CPU ms per MiB', 'wall ms per MiB', '÷ copy (CPU)', 'goal'];
  const align: Align[] = ['left', 'right', 'right', 'right', 'right'];
  const label: Record<Variant, string> = {
    redact: 'StreamRedactor.write, 512 values',
    scan: 'floor: a JS loop reading every code unit',
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
    `values: 512, ${Math.min(...values.map((v) => v.length))}–${Math.max(...values.map((v) => v.length))} ` +
    `characters; text: ${chunks.length} chunks, 1 MiB, ${hidden} stretches hidden; automaton built once ` +
    `in ${buildMs.toFixed(1)} ms; ratio ${ratio.toFixed(2)} (goal ≤ ${GOAL}: ${ratio <= GOAL ? 'met' : 'NOT met'})`;
  console.log(textTable(header, rows, align));
  console.log(facts);
  writeResults(
    resultsDir,
    'redaction',
    started,
    { benchmark: 'redaction', goal: GOAL, machine, rounds, reps, buildMs, hidden, ratio, samples },
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
