/**
 * The ways of giving an attempt its working folder, measured on the bench's bundle unpacked (the
 * `bundle` group's second table, ADR 0051 "as measured"): each makes a tree of the same 500 files,
 * rounds alternate them, wall and CPU time of this process per tree, and what removing it costs.
 */
import { cp, mkdtemp, rename, writeFile } from 'node:fs/promises';
import { linkSync, lstatSync, mkdirSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { copyTree } from '../apps/worker/src/bundles/copy-tree';
import { unpackBundle } from '../apps/worker/src/bundles/unpack-bundle';
import { benchBundle } from './bundle';
import { median } from './lib/measure';

export const COPY_WAYS = ['fs.cp', 'copyTree', 'hard links', 'spare rename'] as const;
export type CopyWay = (typeof COPY_WAYS)[number];

export interface CopyWayRow {
  readonly way: CopyWay;
  readonly samples: number;
  readonly wallMs: number;
  readonly cpuMs: number;
  /** The tree removed afterwards (`rm -r` as `fs.rmSync`). */
  readonly removeMs: number;
}

/** Hard links of every file (what a read-only cache shared by inode would cost). */
function linkTree(src: string, dest: string): void {
  mkdirSync(dest);
  for (const name of readdirSync(src)) {
    const from = join(src, name);
    if (lstatSync(from).isDirectory()) linkTree(from, join(dest, name));
    else linkSync(from, join(dest, name));
  }
}

/** The unpack of the bundle (what a first run adds beside its download) and each way, `rounds` times. */
export async function measureCopyWays(
  mib: number,
  files: number,
  rounds: number,
): Promise<{ unpackMs: number; rows: CopyWayRow[] }> {
  const dir = await mkdtemp(join(tmpdir(), 'ql-bench-copy-'));
  try {
    const archive = join(dir, 'b.tar.gz');
    await writeFile(archive, benchBundle(mib, files).content);
    const unpacks: number[] = [];
    for (let i = 0; i < 3; i++) {
      const t = performance.now();
      await unpackBundle(archive, join(dir, `u${i}`));
      unpacks.push(performance.now() - t);
      if (i > 0) rmSync(join(dir, `u${i}`), { recursive: true });
    }
    const src = join(dir, 'u0');
    const make: Record<CopyWay, (dest: string) => Promise<void>> = {
      'fs.cp': (dest) =>
        cp(src, dest, { recursive: true, verbatimSymlinks: true, errorOnExist: true, force: false }),
      copyTree: (dest) => copyTree(src, dest),
      'hard links': async (dest) => linkTree(src, dest),
      // The spare was made before (not timed): the attempt's part is one rename.
      'spare rename': (dest) => rename(`${dest}.spare`, dest),
    };
    const figures = new Map<CopyWay, { wall: number[]; cpu: number[]; remove: number[] }>(
      COPY_WAYS.map((w) => [w, { wall: [], cpu: [], remove: [] }]),
    );
    let n = 0;
    for (let round = 0; round < rounds; round++) {
      const order = round % 2 ? [...COPY_WAYS].reverse() : COPY_WAYS;
      for (const way of order) {
        const dest = join(dir, `t${n++}`);
        if (way === 'spare rename') await copyTree(src, `${dest}.spare`);
        const cpu = process.cpuUsage();
        const t = performance.now();
        await make[way](dest);
        const wall = performance.now() - t;
        const used = process.cpuUsage(cpu);
        const r = performance.now();
        rmSync(dest, { recursive: true });
        const f = figures.get(way)!;
        f.wall.push(wall);
        f.cpu.push((used.user + used.system) / 1000);
        f.remove.push(performance.now() - r);
      }
    }
    return {
      unpackMs: median(unpacks),
      rows: COPY_WAYS.map((way) => {
        const f = figures.get(way)!;
        return {
          way,
          samples: f.wall.length,
          wallMs: median(f.wall),
          cpuMs: median(f.cpu),
          removeMs: median(f.remove),
        };
      }),
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
