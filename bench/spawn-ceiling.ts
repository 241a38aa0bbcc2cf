/**
 * The spawn ceiling of the `dispatch` group: how many no-op processes per second a Node process can
 * start and see end on this machine, spawned the way the worker's `local-process` executor spawns a
 * run (apps/worker/src/executor/local-process.executor.ts): `/bin/sh -c true`, detached (its own
 * process group), stdin ignored, stdout and stderr piped, done when it has exited and its pipes have
 * closed. No database, no HTTP: any worker that starts one process per run drains at most this many
 * runs/s, whatever the control plane does.
 *
 * `measureSpawnCeiling` runs it in a separate Node process started with the worker's V8 flags
 * (`WORKER_NODE_FLAGS`: a fork copies the parent's address space, so its cost depends on the parent)
 * and reads the one JSON line that process prints. That process runs bench/spawn-ceiling-child.ts.
 */
import { join } from 'node:path';
import { WORKER_NODE_FLAGS } from '../apps/worker/src/node-flags';
import { DIST } from './lib/plane';
import { spawnNode } from './lib/processes';
import type { SpawnCeiling } from './spawn-ceiling-child';

export type { SpawnCeiling } from './spawn-ceiling-child';

/** Runs `spawnLoops` in a fresh Node process with the worker's V8 flags; resolves with its result. */
export async function measureSpawnCeiling(
  concurrency: number,
  count: number,
  warmup: number,
): Promise<SpawnCeiling> {
  const proc = spawnNode(
    [
      ...WORKER_NODE_FLAGS,
      join(DIST, 'bench/spawn-ceiling-child.js'),
      String(concurrency),
      String(count),
      String(warmup),
    ],
    {},
  );
  const code = await proc.exited;
  const result = proc.lines.find((l) => typeof l.spawnsPerSecond === 'number');
  if (code !== 0 || !result) throw new Error(`spawn ceiling exited ${code}: ${proc.output.join('\n')}`);
  return result as unknown as SpawnCeiling;
}
