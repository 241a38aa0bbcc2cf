/**
 * The memory group's module costs: each layer of the worker's graph required in a fresh `node`,
 * cumulatively (what Nest costs, what we add on top), RSS and heap after a full GC; and the CommonJS
 * packages of the worker's graph.
 */
import { DIST } from './lib/plane';
import { spawnNode } from './lib/processes';

export interface ModuleCostRow {
  readonly step: string;
  readonly rssMiB: number;
  readonly heapUsedMiB: number;
}

const DEFERRED = 'deferred:';

/** RSS of a fresh `node` after requiring `modules` in order (after a full GC and a short settle). */
function moduleCostStep(
  modules: readonly string[],
): Promise<ModuleCostRow & { packages: Record<string, number> }> {
  // `deferred:<module>`: required as the entry points require Nest, its date formatters deferred (ADRs 0024, 0048).
  const deferring = `${DIST}/libs/contracts/src/deferred-date-formats.js`;
  const load = (m: string) =>
    m.startsWith(DEFERRED)
      ? `require(${JSON.stringify(deferring)}).withDeferredDateTimeFormats(() => require(${JSON.stringify(m.slice(DEFERRED.length))}));`
      : `require(${JSON.stringify(m)});`;
  const code = `
    ${modules.map(load).join('\n')}
    global.gc();
    setTimeout(() => {
      const packages = {};
      for (const file of Object.keys(require.cache)) {
        const at = file.lastIndexOf('node_modules/');
        if (at < 0) continue;
        const parts = file.slice(at + 13).split('/');
        const name = parts[0].startsWith('@') ? parts[0] + '/' + parts[1] : parts[0];
        packages[name] = (packages[name] || 0) + 1;
      }
      const m = process.memoryUsage();
      process.stdout.write(JSON.stringify({ rss: m.rss, heapUsed: m.heapUsed, packages }) + '\\n');
      process.exit(0);
    }, 300);`;
  const proc = spawnNode(['--expose-gc', '-e', code], {});
  return proc.exited.then(() => {
    const line = proc.lines[0] as
      { rss: number; heapUsed: number; packages: Record<string, number> } | undefined;
    if (!line) throw new Error(`module cost step failed: ${proc.output.join('\n')}`);
    return {
      step: modules.length
        ? modules
            .map((m) => m.replace(`${DIST}/`, '').replace(/^deferred:(.*)$/, '$1 (date formatters deferred)'))
            .join(' + ')
        : '(bare node)',
      rssMiB: line.rss / 2 ** 20,
      heapUsedMiB: line.heapUsed / 2 ** 20,
      packages: line.packages,
    };
  });
}

/** Each layer of the worker's graph on its own, cumulatively: what Nest costs, what we add on top. */
export async function moduleCost() {
  const worker = `${DIST}/apps/worker/src/worker.module.js`;
  const steps: string[][] = [
    [],
    ['reflect-metadata', 'rxjs'],
    ['reflect-metadata', '@nestjs/common'],
    ['reflect-metadata', '@nestjs/core'],
    ['reflect-metadata', '@nestjs/core', `${DIST}/libs/contracts/src/index.js`],
    ['reflect-metadata', '@nestjs/core', '@nestjs/schedule'],
    ['reflect-metadata', '@nestjs/core', `${DIST}/libs/domain/src/index.js`],
    ['reflect-metadata', '@nestjs/core', worker],
    ['reflect-metadata', `${DEFERRED}@nestjs/core`],
    ['reflect-metadata', `${DEFERRED}@nestjs/core`, worker],
  ];
  const rows: ModuleCostRow[] = [];
  let workerPackages: Record<string, number> = {};
  for (const step of steps) {
    const { packages, ...row } = await moduleCostStep(step);
    rows.push(row);
    if (step.includes(worker)) workerPackages = packages;
  }
  return { rows, workerPackages };
}
