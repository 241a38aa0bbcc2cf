/**
 * `node dist/bench/peer-graphile-main.js` (after `npm run build`): graphile-worker's no-op job
 * throughput on the bench PostgreSQL server, one line per concurrency. See bench/peer-graphile.ts.
 *
 * Environment:
 *   QL_BENCH_PG_URL       server to create the run's database on
 *                         (default postgres://postgres@127.0.0.1:5432/postgres)
 *   QL_BENCH_CONCURRENCY  comma-separated worker counts (default 1,8,32)
 *   QL_PEER_BACKLOG       jobs enqueued before each run (default 1000)
 *   QL_PEER_WARMUP_JOBS   completions not counted (default 100)
 *   QL_PEER_MEASURE_JOBS  completions counted (default 600)
 */
import { measureGraphilePeer } from './peer-graphile';
import { envNumber } from './lib/measure';
import { createBenchDatabase, redactUrl } from './lib/postgres-admin';
import { fmtInt, machineInfo } from './lib/report';

async function main(): Promise<void> {
  const pgUrl = process.env.QL_BENCH_PG_URL || 'postgres://postgres@127.0.0.1:5432/postgres';
  const concurrencies = (process.env.QL_BENCH_CONCURRENCY || '1,8,32').split(',').map((s) => {
    const n = Number(s.trim());
    if (!Number.isInteger(n) || n < 1) throw new Error(`QL_BENCH_CONCURRENCY: bad value "${s}"`);
    return n;
  });
  const backlog = Math.floor(envNumber('QL_PEER_BACKLOG', 1000, 1));
  const warmupJobs = Math.floor(envNumber('QL_PEER_WARMUP_JOBS', 100, 0));
  const measureJobs = Math.floor(envNumber('QL_PEER_MEASURE_JOBS', 600, 1));
  const machine = machineInfo(new Date());

  const database = await createBenchDatabase(pgUrl);
  console.log(
    `graphile-worker peer: no-op jobs, backlog ${backlog}, ${measureJobs} counted after ${warmupJobs} warm-up, ` +
      `N = ${concurrencies.join(', ')}; PostgreSQL ${database.serverVersion} on ${redactUrl(pgUrl)}, ` +
      `node ${machine.node}, ${machine.cpuCount} CPUs, load ${machine.loadAvgAtStart}`,
  );
  try {
    for (const concurrency of concurrencies) {
      const r = await measureGraphilePeer(database.url, {
        concurrency,
        backlog,
        measureJobs,
        warmupJobs,
        log: (line) => console.log(`  ${line}`),
      });
      console.log(
        `graphile-worker N=${r.concurrency}: ${fmtInt(r.jobsPerSecond)} jobs/s ` +
          `(${r.jobs} jobs in ${r.seconds.toFixed(3)} s, backlog ${r.backlog}), ` +
          `node CPU ${r.processCpuUsPerJob.toFixed(0)} µs/job`,
      );
    }
  } finally {
    await database
      .drop()
      .catch((error: Error) => console.log(`could not drop ${database.name}: ${error.message}`));
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
