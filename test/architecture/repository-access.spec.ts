/**
 * Issue 30 item 7: control-plane services reach repositories one way, through the domain's port
 * tokens (`@Inject(TASK_REPOSITORY) tasks: TaskRepository`), which `CoreModule` binds to the one core's
 * repositories. Only the composition roots — `core/` (the core and its module), `bootstrap.ts` (the
 * listeners' edge hooks, the start's key check) and `cli.ts` (each command's own core) — name the
 * concrete `Sql…Repository` classes or the core's `repositories`; no module builds one in a factory.
 * And no repository imports another: SQL run inside another repository's transaction lives in a
 * helper module (`audit-sql.ts`, `session-sql.ts` …), ADR 0064 §3.
 */
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';

const ROOT = resolve(__dirname, '../..');
const PLANE = join(ROOT, 'apps/control-plane/src');
const ROOTS = new Set(['core/core.ts', 'core/core.module.ts', 'bootstrap.ts', 'cli.ts']);

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return sources(path);
    return name.endsWith('.ts') && !name.endsWith('.spec.ts') ? [path] : [];
  });
}

const files = sources(PLANE).map((path) => ({
  path: relative(PLANE, path),
  text: readFileSync(path, 'utf8'),
}));

describe('repository access in the control plane', () => {
  it('reads the control plane and finds its composition roots', () => {
    expect(files.length).toBeGreaterThan(100);
    expect(files.map((f) => f.path)).toEqual(expect.arrayContaining([...ROOTS]));
  });

  it('no service, controller or module outside the composition roots names a concrete repository or the core’s repositories', () => {
    const found = files
      .filter((f) => !ROOTS.has(f.path))
      .flatMap(({ path, text }) =>
        [...text.matchAll(/\bSql\w*Repository\b|\brepositories\.\w+|\bcreateRepositories\b/g)].map(
          (m) => `${path}: ${m[0]}`,
        ),
      );
    expect(found).toEqual([]);
  });

  it('CoreModule binds a port token to every repository of the core but the metrics’ own statistics', () => {
    const core = files.find((f) => f.path === 'core/core.module.ts')!.text;
    const bound = [...core.matchAll(/provide: (\w+_REPOSITORY), useValue: core\.repositories\.(\w+)/g)].map(
      (m) => m[2],
    );
    const persistence = readFileSync(join(ROOT, 'libs/persistence/src/open-database.ts'), 'utf8');
    const block = persistence.slice(persistence.indexOf('export interface Repositories {'));
    const members = [...block.slice(0, block.indexOf('\n}')).matchAll(/readonly (\w+):/g)].map((m) => m[1]);
    expect(members.length).toBeGreaterThan(10);
    expect(members.filter((m) => !bound.includes(m))).toEqual(['stats']);
  });

  it('in libs/persistence only open-database.ts (which builds them) and index.ts import a repository', () => {
    const dir = join(ROOT, 'libs/persistence/src');
    const found = sources(dir)
      .map((path) => ({ path: relative(dir, path), text: readFileSync(path, 'utf8') }))
      .filter(({ path }) => path !== 'open-database.ts' && path !== 'index.ts')
      .flatMap(({ path, text }) =>
        [...text.matchAll(/from '(\.{1,2}\/[^']*\.repository)'/g)].map((m) => `${path}: ${m[1]}`),
      );
    expect(found).toEqual([]);
  });
});
