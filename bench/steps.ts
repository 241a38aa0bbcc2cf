/**
 * Lease steps on PostgreSQL (issue 10 item 1, ADR 0017): `starting` → `running` → `completion` of
 * pre-claimed runs through `SqlActivationRepository`, as one statement each (`ql_lease_step`) beside
 * the repository's explaining transaction alone (the path every step took before, and the one a miss
 * still takes), alternated round by round on the same database.
 */
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { createIdGenerator } from '@ql/contracts';
import { LeaseFenceCommand, leaseTokenDigest } from '@ql/domain';
import { PostgresDatabase, SqlActivationRepository, SqlDatabase, SqlLeaseRepository } from '@ql/persistence';
import { reset, seed } from './claim';
import { envNumber, median } from './lib/measure';
import { createBenchDatabase, redactUrl } from './lib/postgres-admin';
import { Align, fmtInt, machineInfo, markdownTable, textTable } from './lib/report';
import { writeResults } from './lib/results';

type Variant = 'statement' | 'transaction';
interface Sample {
  readonly stepsPerSecond: number;
  readonly statementsPerRun: number;
}

/** The database as the repository sees it, but not PostgreSQL: it takes its transaction path. */
function transactionOnly(db: SqlDatabase): SqlDatabase {
  return new Proxy(db, {
    get: (target, key) => {
      if (key === 'dialect') return 'postgres-transaction';
      const value = Reflect.get(target, key, target) as unknown;
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
}

async function sample(
  db: SqlDatabase,
  acts: SqlActivationRepository,
  workers: Awaited<ReturnType<typeof seed>>,
  runs: number,
): Promise<Sample> {
  await reset(db);
  const ids = createIdGenerator();
  const leases = new SqlLeaseRepository(db, ids);
  const loops: LeaseFenceCommand[][] = workers.map(() => []);
  for (let i = 0; i < runs; i++) {
    const w = workers[i % workers.length]!;
    const tokenDigest = leaseTokenDigest(randomBytes(32).toString('base64url'));
    const fence = { generation: w.generation, expectedVersion: w.version };
    const base = { workerId: w.workerId, sessionId: w.sessionId, fence, offerId: ids.uuidV7(), tokenDigest };
    const claimed = await leases.claim({ ...base, leaseMs: 600_000, preferenceHoldMs: 0 });
    if (claimed.kind !== 'offered') throw new Error(`bench claim: ${claimed.kind}`);
    loops[i % workers.length]!.push({ ...base, leaseGeneration: claimed.offer.lease.leaseGeneration, leaseVersion: 0 });
  }
  const before = db.statements.value;
  const t0 = performance.now();
  await Promise.all(
    loops.map(async (fences) => {
      for (const fence of fences) {
        await acts.starting(fence);
        await acts.running({ ...fence, executorHandle: 'pid:1' });
        const done = await acts.complete({ ...fence, outcome: 'succeeded', exitCode: 0, errorSummary: null });
        if (done.status !== 'applied') throw new Error(`bench completion: ${done.status}`);
      }
    }),
  );
  const ms = performance.now() - t0;
  return { stepsPerSecond: (runs * 3 * 1000) / ms, statementsPerRun: (db.statements.value - before) / runs };
}

export async function stepsMain(resultsDir: string): Promise<void> {
  const started = new Date();
  const machine = machineInfo(started);
  const rounds = Math.floor(envNumber('QL_BENCH_ROUNDS', 3, 2));
  const runs = Math.floor(envNumber('QL_BENCH_STEP_RUNS', 300, 1));
  const concurrencies = (process.env.QL_BENCH_STEP_CONCURRENCY || '1,8').split(',').map(Number);
  const pgUrl = process.env.QL_BENCH_PG_URL || 'postgres://postgres@127.0.0.1:5432/postgres';
  console.log(
    `steps bench (PostgreSQL): ${runs} runs × 3 steps per sample, ${rounds} rounds, N = ${concurrencies.join(', ')}; ` +
      `node ${machine.node}, ${machine.cpuCount} CPUs, load ${machine.loadAvgAtStart}`,
  );
  const database = await createBenchDatabase(pgUrl).catch((error: Error) => {
    console.log(`steps bench skipped: cannot create a database on ${redactUrl(pgUrl)} (${error.message})`);
    return undefined;
  });
  if (!database) return;
  const rows: { n: number; samples: Record<Variant, Sample[]> }[] = [];
  try {
    const db = await PostgresDatabase.open({ url: database.url, poolSize: Math.max(...concurrencies) + 1 }, true);
    try {
      const all = await seed(db, createIdGenerator(), runs, Math.max(...concurrencies));
      const acts: Record<Variant, SqlActivationRepository> = {
        statement: new SqlActivationRepository(db),
        transaction: new SqlActivationRepository(transactionOnly(db)),
      };
      for (const n of concurrencies) {
        const samples: Record<Variant, Sample[]> = { statement: [], transaction: [] };
        for (let round = 0; round < rounds; round++) {
          const order: Variant[] = round % 2 ? ['transaction', 'statement'] : ['statement', 'transaction'];
          for (const variant of order) samples[variant].push(await sample(db, acts[variant], all.slice(0, n), runs));
        }
        rows.push({ n, samples });
        const [one, tx] = [median(samples.statement.map((s) => s.stepsPerSecond)), median(samples.transaction.map((s) => s.stepsPerSecond))];
        console.log(`steps N=${n}: one statement ${fmtInt(one)} steps/s, transaction ${fmtInt(tx)} steps/s`);
      }
    } finally {
      await db.close();
    }
  } finally {
    await database.drop().catch((error: Error) => console.log(`could not drop ${database.name}: ${error.message}`));
  }
  const header = ['N', 'one statement steps/s', 'transaction steps/s', 'ratio', 'statements per run (3 steps)'];
  const align: Align[] = header.map(() => 'right');
  const table = rows.map(({ n, samples }) => {
    const one = median(samples.statement.map((s) => s.stepsPerSecond));
    const tx = median(samples.transaction.map((s) => s.stepsPerSecond));
    const statements = `${samples.statement[0]!.statementsPerRun} / ${samples.transaction[0]!.statementsPerRun}`;
    return [String(n), fmtInt(one), fmtInt(tx), `${(one / tx).toFixed(2)} ×`, statements];
  });
  console.log(textTable(header, table, align));
  writeResults(resultsDir, 'steps', started, { benchmark: 'steps', machine, runs, rounds, rows }, [
    '# Lease steps on PostgreSQL: one statement beside the transaction',
    '',
    `Run ${machine.date} — node ${machine.node}, ${machine.platform}, ${machine.cpuCount} × ${machine.cpuModel}, ` +
      `${machine.totalMemMiB} MiB, 1-min load at start ${machine.loadAvgAtStart}.`,
    '',
    `N closed loops drive \`starting\` → \`running\` → \`completion\` of ${runs} pre-claimed runs through ` +
      '`SqlActivationRepository` (claims are not timed). "one statement": each applied step is `ql_lease_step` ' +
      '(ADR 0017); "transaction": the same repository made to take its explaining transaction (the path every ' +
      `step took before, and the one a refusal or replay still takes). Medians of ${rounds} alternated samples.`,
    '',
    markdownTable(header, table, align),
    '',
  ]);
}
