import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';

const ROOT = resolve(__dirname, '../..');
const FOLDERS = ['apps', 'libs', 'migrations', 'test', 'bench', 'scripts'];
const MAX_LINES = 400;

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return name === 'node_modules' ? [] : sources(path);
    return /\.(ts|tsx|js|mjs)$/.test(name) ? [path] : [];
  });
}

/** The layout rule of the design card: a file over ~400 lines says at its top why it stays whole. */
describe('source file size', () => {
  it(`every source file over ${MAX_LINES} lines starts with a "// Size:" line giving its reason`, () => {
    const unexplained = FOLDERS.flatMap((folder) => sources(join(ROOT, folder)))
      .map((path) => ({ path, text: readFileSync(path, 'utf8') }))
      .filter(({ text }) => (text.match(/\n/g) ?? []).length > MAX_LINES && !text.startsWith('// Size: '))
      .map(({ path }) => relative(ROOT, path));
    expect(unexplained).toEqual([]);
  });
});
