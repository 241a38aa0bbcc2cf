/**
 * R-OPS-7: the docs stand alone. A requirement id (`R-WRK-7`), an issue (`issue 9`) or an ADR number
 * a reader meets anywhere in the repository is explained inside it: requirement ids and issues in
 * docs/product.md, ADRs as files in docs/adr/. And the README says what the code does: its event
 * list, its bench groups, and an Idempotency-Key example that does not replay an old run.
 */
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { RUN_EVENT_TYPES } from '@ql/domain';
import { SUCCEEDED_RUN_EVENTS } from '../support/fixtures';

const ROOT = resolve(__dirname, '../..');
const read = (...path: string[]) => readFileSync(join(ROOT, ...path), 'utf8');
const SKIP = new Set(['node_modules', 'dist', 'var', '.git', 'results']);

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return SKIP.has(name) ? [] : files(path);
    return /\.(ts|js|mjs|md|ya?ml|service)$|^Dockerfile$/.test(name) ? [path] : [];
  });
}

/** Every text a reader may meet: README, docs, source comments, deployment files. */
const texts = [
  'README.md',
  'Dockerfile',
  'docker-compose.yml',
  ...['docs', 'apps', 'libs', 'migrations', 'test', 'bench', 'scripts', 'deploy'].flatMap((dir) =>
    files(join(ROOT, dir)).map((path) => relative(ROOT, path)),
  ),
].map((path) => ({ path, text: read(path) }));

const product = read('docs', 'product.md');
/** The first column of a section's table in product.md. */
function tableKeys(heading: string): string[] {
  const start = product.indexOf(`\n## ${heading}\n`);
  expect({ heading, found: start >= 0 }).toEqual({ heading, found: true });
  const end = product.indexOf('\n## ', start + 1);
  const section = product.slice(start, end < 0 ? undefined : end);
  return [...section.matchAll(/^\| ([^|\s]+)\s*\|/gm)]
    .map((m) => m[1]!)
    .filter((k) => !/^(id|issue|-+)$/.test(k));
}

function mentions(pattern: RegExp): Map<string, string[]> {
  const found = new Map<string, string[]>();
  for (const { path, text } of texts)
    for (const m of text.matchAll(pattern)) found.set(m[1]!, [...(found.get(m[1]!) ?? []), path]);
  return found;
}

describe('references a reader can resolve', () => {
  it('every requirement id used in the repository (R-…) is defined in docs/product.md, "Requirement ids"', () => {
    const defined = tableKeys('Requirement ids');
    expect(defined.length).toBeGreaterThan(50);
    const used = mentions(/\b(R-[A-Z]+-\d+)\b/g);
    expect(used.size).toBeGreaterThan(20);
    const undefinedIds = [...used]
      .filter(([id]) => !defined.includes(id))
      .map(([id, where]) => `${id} (${where[0]})`);
    expect(undefinedIds).toEqual([]);
  });

  it('every issue named in the repository ("issue N") is explained in docs/product.md, "Issue references"', () => {
    const explained = tableKeys('Issue references');
    const used = mentions(/\b[Ii]ssues? (\d+)\b/g);
    expect(used.size).toBeGreaterThan(3);
    const unexplained = [...used]
      .filter(([n]) => !explained.includes(n))
      .map(([n, where]) => `issue ${n} (${where[0]})`);
    expect(unexplained).toEqual([]);
  });

  it('every ADR number up to the last has a file in docs/adr/, and every "ADR NNNN" named exists', () => {
    const numbers = readdirSync(join(ROOT, 'docs', 'adr'))
      .map((name) => /^(\d{4})-.+\.md$/.exec(name)?.[1])
      .filter((n): n is string => n !== undefined)
      .map(Number);
    const last = Math.max(...numbers);
    const missing = Array.from({ length: last }, (_, i) => i + 1).filter((n) => !numbers.includes(n));
    expect(missing).toEqual([]);
    const named = [...mentions(/\bADRs? (\d{4})\b/g).keys()].map(Number);
    expect(named.filter((n) => !numbers.includes(n))).toEqual([]);
  });

  it('the "design card" some files name is explained in docs/product.md', () => {
    expect(texts.some(({ text }) => text.includes('design card'))).toBe(true);
    expect(product).toMatch(/"design card"/);
  });
});

describe('the README says what the code does', () => {
  const readme = read('README.md');

  it('its run events are the ones a successful run gets, all of them known types', () => {
    const start = readme.indexOf('the events in order:');
    expect(start).toBeGreaterThan(0);
    const listed = [
      ...readme.slice(start, readme.indexOf('curl', start)).matchAll(/\b((?:run|attempt)\.[a-z_]+)/g),
    ].map((m) => m[1]!);
    expect(listed).toEqual(SUCCEEDED_RUN_EVENTS);
    // docs/product.md lists every event type the code has.
    for (const type of RUN_EVENT_TYPES)
      expect({ type, documented: product.includes(`| \`${type}\``) }).toEqual({ type, documented: true });
  });

  it('its bench groups are the groups `npm run bench` knows', () => {
    const source = read('bench', 'run.ts');
    const list = /const SUITES = \[([^\]]*)\]/.exec(source)?.[1];
    expect(list).toBeDefined();
    const groups = [...list!.matchAll(/'([a-z-]+)'/g)].map((m) => m[1]!);
    const sentence = readme.slice(readme.indexOf('(groups:'), readme.indexOf('see bench/README.md'));
    expect([...sentence.matchAll(/`([a-z-]+)`/g)].map((m) => m[1]!)).toEqual(groups);
  });

  it('its trigger example sends a fresh Idempotency-Key each time (a fixed one returns the first run again)', () => {
    const keys = [...readme.matchAll(/Idempotency-Key: ([^'"\s]+)/g)].map((m) => m[1]!);
    expect(keys.length).toBeGreaterThan(0);
    for (const key of keys) expect(key).toMatch(/\$\(/); // computed by the shell at each call
  });
});
