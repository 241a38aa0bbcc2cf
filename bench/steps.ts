/**
 * Lease steps (issue 10 item 1, ADR 0017 and 0025): `starting` → `running` → `completion` of
 * pre-claimed runs through `SqlActivationRepository` as shipped — PostgreSQL: one statement each
 * (`ql_lease_step`); SQLite: the lean transaction (one read, no RETURNING) — beside the repository's
 * explaining transaction alone (the path every step took before, and the one a miss still takes on
 * PostgreSQL), alternated round by round on the same database.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { createIdGenerator, systemClock } from '@ql/contracts';
import { LeaseFenceCommand, leaseTokenDigest } from '@ql/domain';
import {
  PostgresDatabase,
  SqlActivationRepository,
  SqlDatabase,
  SqlLeaseRepository,
  SqliteDatabase,
} from '@ql/persistence';
import { reset, seed, settle } from './claim';
import { envNumber, median } from './lib/measure';
import { planeSqliteCacheKiB } from './lib/plane';
import { createBenchDatabase, redactUrl } from './lib/postgres-admin';
import { Align, fmtInt, machineInfo, markdownTable, textTable } from './lib/report';
import { writeResults } from './lib/results';

type Variant = 'statement' | 'transaction';
interface Sample {
  readonly stepsPerSecond: number;
  readonly statementsPerRun: number;
  /** SQLite: rows the statements handed back per run (0 on PostgreSQL, which does not count them). */
  readonly rowsPerRun: number;
  readonly cpuUsPerStep: number;
}

/** The database as the repository sees it, but of no dialect it has a lean path for: the transaction path. */
function transactionOnly(db: SqlDatabase): SqlDatabase {
  return new Proxy(db, {
    get: (target, key) => {
      if (key === 'dialect') return `${target.dialect}-transaction`;
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
    const claimed = await leases.claim({
      ...base,
      leaseMs: 600_000,
      preferenceHoldMs: 0,
      software: { softwareVersion: '0.1.0', wireVersion: 2 },
    });
    if (claimed.kind !== 'offered') throw new Error(`bench claim: ${claimed.kind}`);
    loops[i % workers.length]!.push({
      ...base,
      leaseGeneration: claimed.offer.lease.leaseGeneration,
      leaseVersion: 0,
    });
  }
  const [before, rowsBefore] = [db.statements.value, db.statements.rows];
  const cpu = process.cpuUsage();
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
  await settle(db); // SQLite: the WAL checkpoint the sample's writes made necessary
  const ms = performance.now() - t0;
  const used = process.cpuUsage(cpu);
  return {
    stepsPerSecond: (runs * 3 * 1000) / ms,
    statementsPerRun: (db.statements.value - before) / runs,
    rowsPerRun: (db.statements.rows - rowsBefore) / runs,
    cpuUsPerStep: (used.user + used.system) / (runs * 3),
  };
}

type Row = { dialect: 'sqlite' | 'postgres'; n: number; samples: Record<Variant, Sample[]> };

async function measure(
  dialect: Row['dialect'],
  db: SqlDatabase,
  concurrencies: number[],
  rounds: number,
  runs: number,
): Promise<Row[]> {
  const rows: Row[] = [];
  const all = await seed(db, createIdGenerator(), runs, Math.max(...concurrencies));
  const acts: Record<Variant, SqlActivationRepository> = {
    statement: new SqlActivationRepository(db),
    transaction: new SqlActivationRepository(transactionOnly(db)),
  };
  for (const n of concurrencies) {
    const samples: Record<Variant, Sample[]> = { statement: [], transaction: [] };
    for (let round = 0; round < rounds; round++) {
      const order: Variant[] = round % 2 ? ['transaction', 'statement'] : ['statement', 'transaction'];
      for (const variant of order)
        samples[variant].push(await sample(db, acts[variant], all.slice(0, n), runs));
    }
    rows.push({ dialect, n, samples });
    const [one, tx] = [
      median(samples.statement.map((s) => s.stepsPerSecond)),
      median(samples.transaction.map((s) => s.stepsPerSecond)),
    ];
    console.log(
      `steps ${dialect} N=${n}: as shipped ${fmtInt(one)} steps/s, transaction ${fmtInt(tx)} steps/s`,
    );
  }
  return rows;
}

export async function stepsMain(resultsDir: string): Promise<void> {
  const started = new Date();
  const machine = machineInfo(started);
  const rounds = Math.floor(envNumber('QL_BENCH_ROUNDS', 3, 2));
  const runs = Math.floor(envNumber('QL_BENCH_STEP_RUNS', 300, 1));
  const concurrencies = (process.env.QL_BENCH_STEP_CONCURRENCY || '1,8').split(',').map(Number);
  const dialects = (process.env.QL_BENCH_DIALECTS || 'sqlite,postgres').split(',').map((s) => s.trim());
  const pgUrl = process.env.QL_BENCH_PG_URL || 'postgres://postgres@127.0.0.1:5432/postgres';
  console.log(
    `steps bench (${dialects.join(', ')}): ${runs} runs × 3 steps per sample, ${rounds} rounds, ` +
      `N = ${concurrencies.join(', ')}; node ${machine.node}, ${machine.cpuCount} CPUs, load ${machine.loadAvgAtStart}`,
  );
  const rows: Row[] = [];
  if (dialects.includes('sqlite')) {
    const dir = mkdtempSync(join(tmpdir(), 'ql-bench-steps-'));
    try {
      const db = await SqliteDatabase.open(
        { path: join(dir, 'steps.sqlite'), cacheKiB: planeSqliteCacheKiB() },
        systemClock,
      );
      try {
        rows.push(...(await measure('sqlite', db, concurrencies, rounds, runs)));
      } finally {
        await db.close();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
  if (dialects.includes('postgres')) {
    const database = await createBenchDatabase(pgUrl).catch((error: Error) => {
      console.log(
        `steps bench (PostgreSQL) skipped: cannot create a database on ${redactUrl(pgUrl)} (${error.message})`,
      );
      return undefined;
    });
    if (database) {
      try {
        const db = await PostgresDatabase.open(
          { url: database.url, poolSize: Math.max(...concurrencies) + 1 },
          true,
        );
        try {
          rows.push(...(await measure('postgres', db, concurrencies, rounds, runs)));
        } finally {
          await db.close();
        }
      } finally {
        await database
          .drop()
          .catch((error: Error) => console.log(`could not drop ${database.name}: ${error.message}`));
      }
    }
  }
  const header = [
    'dialect',
    'N',
    'as shipped steps/s',
    'transaction steps/s',
    'ratio',
    'statements per run (3 steps)',
    'rows back per run',
    'CPU µs/step',
  ];
  const align: Align[] = header.map((_, i) => (i === 0 ? 'left' : 'right'));
  const table = rows.map(({ dialect, n, samples }) => {
    const one = median(samples.statement.map((s) => s.stepsPerSecond));
    const tx = median(samples.transaction.map((s) => s.stepsPerSecond));
    const pair = (f: (s: Sample) => number, digits = 0) =>
      `${median(samples.statement.map(f)).toFixed(digits)} / ${median(samples.transaction.map(f)).toFixed(digits)}`;
    return [
      dialect,
      String(n),
      fmtInt(one),
      fmtInt(tx),
      `${(one / tx).toFixed(2)} ×`,
      pair((s) => s.statementsPerRun),
      dialect === 'sqlite' ? pair((s) => s.rowsPerRun) : '—',
      pair((s) => s.cpuUsPerStep),
    ];
  });
  console.log(textTable(header, table, align));
  writeResults(resultsDir, 'steps', started, { benchmark: 'steps', machine, runs, rounds, rows }, [
    '# Lease steps: as shipped beside the explaining transaction',
    '',
    `Run ${machine.date} — node ${machine.node}, ${machine.platform}, ${machine.cpuCount} × ${machine.cpuModel}, ` +
      `${machine.totalMemMiB} MiB, 1-min load at start ${machine.loadAvgAtStart} (2 cores, shared).`,
    '',
    `N closed loops drive \`starting\` → \`running\` → \`completion\` of ${runs} pre-claimed runs through ` +
      '`SqlActivationRepository` (claims are not timed). "as shipped": on PostgreSQL each applied step is ' +
      '`ql_lease_step` (ADR 0017); on SQLite the lean transaction (one read of worker, lease, run and attempt, ' +
      'writes that read nothing back, ADR 0025). "transaction": the same repository made to take its explaining ' +
      'transaction (the path every step took before; on PostgreSQL the one a refusal or replay still takes). ' +
      `Medians of ${rounds} alternated samples; statements count BEGIN and COMMIT; the CPU column is this ` +
      'process (user + system) per step, as shipped / transaction. SQLite samples end with the WAL checkpoint ' +
      'their writes made necessary.',
    '',
    markdownTable(header, table, align),
    '',
  ]);
}
