/**
 * The house rule of issue 30 item 7: no import cycle among the project's own TypeScript files.
 * Every `import`, `export … from`, `import type`, `require()` and `import()` in apps/ and libs/ is
 * resolved as the compiler resolves it (tsconfig.json's options and `@ql/*` paths; the console's own
 * tsconfig for apps/console), and the graph of those files must have no strongly connected component
 * of more than one file (nor a file importing itself). A cycle is named as one shortest circle.
 */
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import * as ts from 'typescript';

const ROOT = resolve(__dirname, '../..');
const FOLDERS = ['apps', 'libs'];
const SKIP = new Set(['node_modules', 'dist']);

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return SKIP.has(name) ? [] : sources(path);
    return /\.tsx?$/.test(name) && !name.endsWith('.d.ts') ? [path] : [];
  });
}

function compilerOptions(tsconfig: string): ts.CompilerOptions {
  const read = ts.readConfigFile(tsconfig, (path) => ts.sys.readFile(path));
  if (read.error) throw new Error(ts.flattenDiagnosticMessageText(read.error.messageText, '\n'));
  return ts.parseJsonConfigFileContent(read.config, ts.sys, dirname(tsconfig)).options;
}

/** Module specifiers a file names: static imports and re-exports (type-only too), require and import(). */
function specifiers(path: string): string[] {
  return ts.preProcessFile(readFileSync(path, 'utf8'), true, true).importedFiles.map((f) => f.fileName);
}

/** The project's import graph: file → the project files it imports (paths relative to the root). */
function importGraph(): Map<string, Set<string>> {
  const main = compilerOptions(join(ROOT, 'tsconfig.json'));
  const consoleOptions = compilerOptions(join(ROOT, 'apps/console/tsconfig.json'));
  const files = FOLDERS.flatMap((folder) => sources(join(ROOT, folder)));
  const inProject = new Set(files);
  const graph = new Map<string, Set<string>>();
  for (const file of files) {
    const options = file.startsWith(join(ROOT, 'apps/console') + '/') ? consoleOptions : main;
    const edges = new Set<string>();
    for (const spec of specifiers(file)) {
      const resolved = ts.resolveModuleName(spec, file, options, ts.sys).resolvedModule?.resolvedFileName;
      if (resolved && inProject.has(resolve(resolved))) edges.add(relative(ROOT, resolve(resolved)));
    }
    graph.set(relative(ROOT, file), edges);
  }
  return graph;
}

/** Strongly connected components of more than one file, or of one file importing itself (Tarjan). */
function cycles(graph: Map<string, Set<string>>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  let next = 0;
  const visit = (v: string): void => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) !== index.get(v)) return;
    const component: string[] = [];
    let w: string;
    do {
      w = stack.pop()!;
      onStack.delete(w);
      component.push(w);
    } while (w !== v);
    if (component.length > 1 || graph.get(v)?.has(v)) found.push(component.sort());
  };
  for (const v of [...graph.keys()].sort()) if (!index.has(v)) visit(v);
  return found;
}

/** One shortest circle through the component's first file (breadth-first inside the component). */
function circle(graph: Map<string, Set<string>>, component: string[]): string {
  const members = new Set(component);
  const start = component[0]!;
  const parent = new Map<string, string>();
  const queue = [start];
  while (queue.length > 0) {
    const v = queue.shift()!;
    for (const w of graph.get(v) ?? []) {
      if (!members.has(w)) continue;
      if (w === start) {
        const path = [v];
        while (path[0] !== start) path.unshift(parent.get(path[0]!)!);
        return [...path, start].join(' -> ');
      }
      if (!parent.has(w)) {
        parent.set(w, v);
        queue.push(w);
      }
    }
  }
  return component.join(', ');
}

describe('import cycles', () => {
  const graph = importGraph();

  it('reads the whole project and resolves its @ql/* aliases', () => {
    expect(graph.size).toBeGreaterThan(300);
    const imported = new Set([...graph.values()].flatMap((edges) => [...edges]));
    for (const lib of ['domain', 'persistence', 'contracts', 'scheduling'])
      expect(imported).toContain(`libs/${lib}/src/index.ts`);
  });

  it('finds a cycle when there is one (the detector itself)', () => {
    const sample = new Map([
      ['a.ts', new Set(['b.ts'])],
      ['b.ts', new Set(['c.ts'])],
      ['c.ts', new Set(['a.ts'])],
      ['d.ts', new Set(['a.ts', 'd.ts'])],
      ['e.ts', new Set<string>()],
    ]);
    expect(cycles(sample)).toEqual([['a.ts', 'b.ts', 'c.ts'], ['d.ts']]);
    expect(circle(sample, ['a.ts', 'b.ts', 'c.ts'])).toBe('a.ts -> b.ts -> c.ts -> a.ts');
  });

  it('no file of apps/ or libs/ reaches itself through its imports', () => {
    const found = cycles(graph).map((component) => ({
      files: component.length,
      circle: circle(graph, component),
      component,
    }));
    expect(found).toEqual([]);
  });
});
