import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

const ROOT = resolve(__dirname, '../..');

function markdownFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? markdownFiles(path) : name.endsWith('.md') ? [path] : [];
  });
}

/** R-OPS-7: the README and docs/ stand alone: every relative link resolves to a file in the repository. */
describe('documentation links', () => {
  const files = [join(ROOT, 'README.md'), ...markdownFiles(join(ROOT, 'docs'))];

  it.each(files.map((f) => [relative(ROOT, f), f]))('%s links only inside the repository', (_name, file) => {
    const text = readFileSync(file, 'utf8');
    expect(text).not.toMatch(/\.\.\/shared|shared\/docs|seeds\//);
    for (const [, target] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
      if (/^(https?:|mailto:|#)/.test(target!)) continue;
      const path = resolve(dirname(file), target!.split('#')[0]!);
      expect({ target, inside: !relative(ROOT, path).startsWith('..') }).toEqual({ target, inside: true });
      expect({ target, exists: existsSync(path) }).toEqual({ target, exists: true });
    }
  });

  it('docs hold the product overview, the module map and the operations guide', () => {
    for (const doc of ['product.md', 'architecture.md'])
      expect(existsSync(join(ROOT, 'docs', doc))).toBe(true);
  });
});
