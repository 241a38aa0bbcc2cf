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
    // Autolinks and reference definitions to the web are links too.
    expect(text).not.toMatch(/<https?:\/\/|^\s*\[[^\]]+\]:\s*https?:/im);
    for (const [, target] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
      // Nothing outside the repository, not even a web page: the docs must stand alone.
      expect({ target, external: /^[a-z][a-z0-9+.-]*:/i.test(target!) }).toEqual({ target, external: false });
      if (target!.startsWith('#')) continue;
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
