/**
 * The samples the `dispatch` group takes right after each drain, at the same level, so that ours and
 * theirs alternate (ours, ceiling, graphile, ours, …) rather than graphile running at another moment:
 * the spawn ceiling (bench/spawn-ceiling.ts), then graphile-worker on a fresh database of the same
 * PostgreSQL server, with that server's CPU read over graphile's counted window.
 */
import { BackendsReader, postgresCpuMs } from './dispatch-cpu';
import { createBenchDatabase } from './lib/postgres-admin';
import { GraphilePeerResult, measureGraphilePeer } from './peer-graphile';
import { SpawnCeiling, measureSpawnCeiling } from './spawn-ceiling';

export interface Beside {
  readonly ceiling?: SpawnCeiling;
  readonly peer?: GraphilePeerResult;
}

/**
 * A function that takes both samples at a level (`runs` counted after `warmup`, like the drains);
 * a sample that fails is left out and says why in `notes`.
 */
export function besideSampler(
  pgUrl: string,
  postmasterPid: number | undefined,
  backends: BackendsReader | undefined,
  runs: number,
  warmup: number,
  notes: string[],
): (level: number, label: string) => Promise<Beside> {
  return async (level, label) => {
    let ceiling: SpawnCeiling | undefined;
    let peer: GraphilePeerResult | undefined;
    try {
      ceiling = await measureSpawnCeiling(level, runs, warmup);
    } catch (error) {
      notes.push(`${label}: no spawn ceiling (${(error as Error).message.split('\n')[0]})`);
    }
    try {
      const database = await createBenchDatabase(pgUrl);
      try {
        peer = await measureGraphilePeer(database.url, {
          concurrency: level,
          backlog: runs + warmup,
          warmupJobs: warmup,
          measureJobs: runs,
          ...(postmasterPid === undefined ? {} : { cpuProbe: () => postgresCpuMs(postmasterPid) }),
          ...(backends ? { backendsProbe: backends } : {}),
        });
      } finally {
        // A failed drop (say, a server out of connections) leaves a database behind, not a bad sample.
        await database.drop().catch((error: Error) => {
          notes.push(`${label}: graphile-worker database not dropped (${error.message.split('\n')[0]})`);
        });
      }
    } catch (error) {
      notes.push(`${label}: no graphile-worker sample (${(error as Error).message.split('\n')[0]})`);
    }
    console.log(
      `  beside ${label}: spawn ceiling ${ceiling?.spawnsPerSecond.toFixed(1) ?? '—'}/s, ` +
        `graphile ${peer?.jobsPerSecond.toFixed(0) ?? '—'} jobs/s`,
    );
    return { ...(ceiling ? { ceiling } : {}), ...(peer ? { peer } : {}) };
  };
}
