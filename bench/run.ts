/**
 * `npm run bench`: heartbeat compare-and-set commits per second through the registry repository,
 * claim throughput (pull → committed lease), idle memory and start-up of the worker and the control
 * plane, dispatch over the real wire (end-to-end runs/s, queue-to-offer latency), and our real path
 * beside a fair peer (graphile-worker spawning the same `sh -c true`: runs/s, CPU per run, latency),
 * a script bundle's start (trigger → running: first run, cached, beside an inline command), each
 * figure beside its ceiling or peer measured in the same run. See bench/README.md.
 *
 * Environment:
 *   QL_BENCH_SUITES          heartbeat,claim,memory,dispatch,steps,curve,worker-cost,lease-enforcement,peer,journal,plane-cost,soak,bundle,redaction (default all); `npm run bench -- memory`
 *                            (arguments) selects groups too; heartbeat-mtls: only the mTLS part of heartbeat
 *   QL_BENCH_MTLS_WORKERS    heartbeat over mTLS: workers, each its own certificate (default 256);
 *                            QL_BENCH_MTLS_IN_FLIGHT heartbeats in flight (default 32)
 *   QL_CURVE_*               curve: WORKERS (100,1000,10000), BACKLOGS (1000,100000,1000000),
 *                            CONCURRENCY (8), CLAIMS (600), HEARTBEATS (1500), SWEEP_CYCLES (3)
 *   QL_BENCH_IDLE_SECONDS    memory: idle time before RSS is read (default 60)
 *   QL_BENCH_SESSIONS        dispatch: worker sessions per level (default 1,4,16)
 *   QL_BENCH_E2E_RUNS        dispatch: counted runs per level (default 150; QL_BENCH_E2E_WARMUP 20 before)
 *   QL_BENCH_LATENCY_*       dispatch: SAMPLES (100) and PULLERS (4); QL_BENCH_PULL_INTERVAL_MS (100); QL_BENCH_PULL_WAIT_MS (2000: long poll, 0: polling)
 *   QL_BENCH_COST_*          worker-cost: RUNS (100), WARMUP (10), ROUNDS (3), BASELINE (dist/ to compare), NODE_FLAGS
 *   QL_BENCH_SWITCH_ARMS     lease-enforcement: armings of the dead man's switch per sample (300);
 *                            QL_BENCH_LEASE_SCENARIOS=0 skips the e2e scenarios (they need jest)
 *   QL_BENCH_JOURNAL_RUNS    journal: runs (7 durable steps each) per sample (default 300); QL_BENCH_JOURNAL_WARMUP (20)
 *   QL_BENCH_PEER_*          peer: LEVELS (W×S: 1x1,4x1,4x4), RUNS (150), WARMUP (20), ROUNDS (3),
 *                            LATENCY_SAMPLES (100), LATENCY_WARMUP (5), LATENCY_PAUSE_MS (50)
 *   QL_BENCH_PLANE_COST_*    plane-cost: RUNS (600), WARMUP (50), WORKERS (4), SLOTS (1), PROFILE_US (250)
 *   QL_BENCH_SOAK_*          soak: MINUTES (30), SETTLE_MINUTES (5), SAMPLE_SECONDS (15), LEVEL (W×S, 2x2), RATE (runs/s;
 *                            default RATE_SHARE 0.5 × a measured maximum of PROBE_RUNS 200), DIALECT (postgres),
 *                            HEAPSNAPSHOT_DIR (heap snapshots of the plane and the workers after the settle and at the end)
 *   QL_BENCH_BUNDLE_*        bundle: ROUNDS (8; a new bundle, its first run, then RUNS 5 cached and 5 inline each),
 *                            MIB (10) in FILES (500); dialects from QL_BENCH_DIALECTS
 *   QL_BENCH_REDACTION_REPS  redaction: passes over the 1 MiB per sample (default 20)
 *   QL_BENCH_STEP_RUNS       steps: pre-claimed runs per sample (default 300); QL_BENCH_STEP_CONCURRENCY (1,8)
 *   QL_BENCH_BACKLOGS        claim: comma-separated queued-run backlogs (default 1000,100000)
 *   QL_BENCH_CLAIMS          claim: claims per sample (default 900; at most backlog - 100 and 924)
 *   QL_BENCH_PEER            claim: 1 (default) also runs graphile-worker on the same PostgreSQL
 *   QL_BENCH_SECONDS         counted seconds per sample (default 3)
 *   QL_BENCH_WARMUP_SECONDS  uncounted warm-up before each sample (default 0.5)
 *   QL_BENCH_ROUNDS          samples per variant, alternated; the median is reported (default 3, min 2)
 *   QL_BENCH_CONCURRENCY     comma-separated loop counts (default 1,8,32)
 *   QL_BENCH_PG_URL          server to create the run's database on
 *                            (default postgres://postgres@127.0.0.1:5432/postgres)
 *   QL_BENCH_DIALECTS        sqlite,postgres (default both)
 *   QL_BENCH_DETAIL          1 (default): also measure the repository's SQL issued raw; 0: skip it
 */
import { checkEntryArgs } from '@ql/contracts';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { claimMain } from './claim-main';
import { curveMain } from './curve-main';
import { dispatchMain } from './dispatch-main';
import { memoryMain } from './memory-main';
import { stepsMain } from './steps';
import { workerCostMain } from './worker-cost';
import { leaseEnforcementMain } from './lease-enforcement';
import { journalMain } from './journal';
import { peerMain } from './peer-main';
import { planeCostMain } from './plane-cost';
import { soakMain } from './soak-main';
import { bundleMain } from './bundle-main';
import { redactionMain } from './redaction';
import { HeartbeatConfig, HeartbeatRow, benchPostgres, benchSqlite } from './heartbeat';
import { validationCost } from './heartbeat-edge';
import { heartbeatMtlsMain } from './heartbeat-mtls-main';
import { envNumber, median } from './lib/measure';
import { createBenchDatabase, redactUrl } from './lib/postgres-admin';
import { Align, fmtInt, fmtPct, machineInfo, markdownTable, memoryInfo, textTable } from './lib/report';
import { rawSamplesLine, writeResultJson } from './lib/results';

const TARGET = 0.7;
const RESULTS_DIR = resolve(__dirname, '../../bench/results');

async function heartbeatMain(): Promise<void> {
  const started = new Date();
  const machine = machineInfo(started);
  const seconds = envNumber('QL_BENCH_SECONDS', 3, 0.1);
  const warmup = envNumber('QL_BENCH_WARMUP_SECONDS', 0.5, 0);
  const rounds = Math.floor(envNumber('QL_BENCH_ROUNDS', 3, 2));
  const concurrencies = (process.env.QL_BENCH_CONCURRENCY || '1,8,32').split(',').map((s) => {
    const n = Number(s.trim());
    if (!Number.isInteger(n) || n < 1) throw new Error(`QL_BENCH_CONCURRENCY: bad value "${s}"`);
    return n;
  });
  const dialects = (process.env.QL_BENCH_DIALECTS || 'sqlite,postgres').split(',').map((s) => s.trim());
  const pgUrl = process.env.QL_BENCH_PG_URL || 'postgres://postgres@127.0.0.1:5432/postgres';
  const detail = process.env.QL_BENCH_DETAIL !== '0';
  const config: HeartbeatConfig = {
    concurrencies,
    rounds,
    window: { warmupMs: warmup * 1000, measureMs: seconds * 1000 },
    detail,
    log: (line) => console.log(line),
  };
  console.log(
    `heartbeat CAS bench: ${seconds}s counted + ${warmup}s warm-up per sample, ${rounds} rounds, ` +
      `N = ${concurrencies.join(', ')}; node ${machine.node}, ${machine.cpuCount} CPUs, load ${machine.loadAvgAtStart}`,
  );

  const rows: HeartbeatRow[] = [];
  const notes: string[] = [];
  let sqliteVersion: string | undefined;
  let postgresVersion: string | undefined;

  if (dialects.includes('sqlite')) {
    const dir = mkdtempSync(join(tmpdir(), 'ql-bench-'));
    try {
      const result = await benchSqlite(join(dir, 'bench.sqlite'), config);
      rows.push(...result.rows);
      sqliteVersion = result.info.sqliteVersion;
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }

  if (dialects.includes('postgres')) {
    let database: Awaited<ReturnType<typeof createBenchDatabase>> | undefined;
    try {
      database = await createBenchDatabase(pgUrl);
    } catch (error) {
      const note = `PostgreSQL rows skipped: cannot create a database on ${redactUrl(pgUrl)} (${(error as Error).message})`;
      console.log(note);
      notes.push(note);
    }
    if (database) {
      postgresVersion = database.serverVersion;
      try {
        await benchPostgres(database.url, config, rows);
      } catch (error) {
        // A shared server may refuse connections (max_connections) or restart: keep what was measured.
        const note = `PostgreSQL rows incomplete: the run stopped with "${(error as Error).message}"`;
        console.log(note);
        notes.push(note);
      } finally {
        await database
          .drop()
          .catch((error: Error) => console.log(`could not drop ${database.name}: ${error.message}`));
      }
    }
  }

  const cost = validationCost(200_000);
  const memory = memoryInfo();
  const header = [
    'dialect',
    'N',
    'repository ops/s',
    'ceiling ops/s',
    'ratio',
    'target',
    'result',
    'node CPU µs/op repo / ceiling',
    ...(detail ? ['CAS SQL raw ops/s', 'repository / CAS SQL raw'] : []),
  ];
  const align: Align[] = header.map((_, i) => (i === 0 || i === 6 ? 'left' : 'right'));
  const table: string[][] = rows.map((r) => {
    const repo = r.median.repository!;
    const ceiling = r.median.ceiling!;
    const ratio = repo / ceiling;
    const cells = [
      r.dialect,
      String(r.concurrency),
      fmtInt(repo),
      fmtInt(ceiling),
      fmtPct(ratio),
      fmtPct(TARGET),
      ratio >= TARGET ? 'pass' : 'FAIL',
      `${r.cpuUsPerOp.repository!.toFixed(1)} / ${r.cpuUsPerOp.ceiling!.toFixed(1)}`,
    ];
    if (detail) cells.push(fmtInt(r.median.casSql), fmtPct(repo / r.median.casSql!));
    return cells;
  });
  // SQLite: how far the WAL got by the end of each window, and the checkpoint charged for it.
  const walLines = rows
    .filter((r) => r.dialect === 'sqlite')
    .map((r) => {
      const wal = (v: 'repository' | 'ceiling') =>
        median(r.samples[v]!.map((s) => s.detail?.walMiBAtEnd ?? Number.NaN)).toFixed(1);
      const ms = (v: 'repository' | 'ceiling') => median(r.samples[v]!.map((s) => s.settleMs)).toFixed(0);
      return (
        `sqlite N=${r.concurrency}: WAL at window end repository ${wal('repository')} MiB / ceiling ` +
        `${wal('ceiling')} MiB; closing checkpoint (charged) ${ms('repository')} ms / ${ms('ceiling')} ms`
      );
    });
  // The heartbeat as the ingress serves it: the service alone, and behind the edge pipe (DTO).
  const edgeHeader = [
    'dialect',
    'N',
    'service ops/s',
    'edge ops/s',
    'edge / service',
    'node CPU µs/op service / edge',
    'edge − service µs/op',
  ];
  const edgeAlign: Align[] = edgeHeader.map((_, i) => (i === 0 ? 'left' : 'right'));
  const edgeTable: string[][] = rows.map((r) => [
    r.dialect,
    String(r.concurrency),
    fmtInt(r.median.service),
    fmtInt(r.median.edge),
    fmtPct(r.median.edge! / r.median.service!),
    `${r.cpuUsPerOp.service!.toFixed(1)} / ${r.cpuUsPerOp.edge!.toFixed(1)}`,
    (r.cpuUsPerOp.edge! - r.cpuUsPerOp.service!).toFixed(1),
  ]);
  const costLine =
    `edge validation alone (CPU, no database): heartbeat body ${cost.heartbeat.edgeUs.toFixed(2)} µs through ` +
    `the pipe (class-validator) vs ${cost.heartbeat.domainUs.toFixed(2)} µs the domain reader alone; register ` +
    `body ${cost.register.edgeUs.toFixed(1)} µs vs ${cost.register.domainUs.toFixed(1)} µs`;
  const memoryLine =
    `memory (informational): RSS ${memory.rssMiB} MiB after the run, peak RSS ${memory.peakRssMiB} MiB, ` +
    `heap used ${memory.heapUsedMiB} MiB`;

  console.log('');
  console.log(textTable(header, table, align));
  console.log('');
  console.log(textTable(edgeHeader, edgeTable, edgeAlign));
  for (const line of [...walLines, costLine, ...notes, memoryLine]) console.log(line);

  const jsonPath = writeResultJson(RESULTS_DIR, 'heartbeat', started, {
    benchmark: 'heartbeat-cas',
    target: TARGET,
    config: { seconds, warmupSeconds: warmup, rounds, concurrencies, detail },
    machine,
    versions: { sqlite: sqliteVersion, postgres: postgresVersion },
    memory,
    validationCost: cost,
    notes,
    rows: rows.map((r) => ({
      ...r,
      ratio: r.median.repository! / r.median.ceiling!,
      pass: r.median.repository! / r.median.ceiling! >= TARGET,
    })),
  });
  const markdown = [
    '# Heartbeat compare-and-set: repository vs. raw single-row UPDATE',
    '',
    `Run ${machine.date} — node ${machine.node}, ${machine.platform}, ${machine.cpuCount} × ${machine.cpuModel}, ` +
      `${machine.totalMemMiB} MiB, 1-min load at start ${machine.loadAvgAtStart}` +
      (sqliteVersion ? `, SQLite ${sqliteVersion}` : '') +
      (postgresVersion ? `, PostgreSQL ${postgresVersion}` : '') +
      '.',
    '',
    `Medians of ${rounds} alternated samples of ${seconds} s (after ${warmup} s warm-up each). ` +
      'Ceiling: `UPDATE workers SET version = version + 1 WHERE worker_id = ?` raw through the same driver, ' +
      'same rows, same N, same pool size. The machine is shared: read the ratios, not the absolute figures.',
    '',
    markdownTable(header, table, align),
    '',
    'The heartbeat as the ingress serves it after the guard, without HTTP and TLS: `service` is ' +
      '`RegistryService.heartbeat` with a plain body, `edge` the same behind the edge pipe (HeartbeatDto, ' +
      'class-validator), as the listener runs it.',
    '',
    markdownTable(edgeHeader, edgeTable, edgeAlign),
    '',
    costLine,
    '',
    ...walLines.map((n) => `- ${n}`),
    ...(walLines.length ? [''] : []),
    ...notes.map((n) => `${n}\n`),
    memoryLine,
    '',
    rawSamplesLine(RESULTS_DIR, jsonPath),
    '',
  ].join('\n');
  writeFileSync(join(RESULTS_DIR, 'latest-heartbeat.md'), markdown);
  console.log(
    `results: ${relative(process.cwd(), jsonPath)}, ${relative(process.cwd(), join(RESULTS_DIR, 'latest-heartbeat.md'))}`,
  );
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const usage = checkEntryArgs(args, USAGE, (arg) => SUITES.includes(arg));
  if (usage !== undefined) {
    process.exitCode = usage;
    return;
  }
  const suites = selectedSuites(args, process.env.QL_BENCH_SUITES);
  if (suites.includes('heartbeat')) await heartbeatMain();
  if (suites.includes('heartbeat') || suites.includes('heartbeat-mtls')) await heartbeatMtlsMain(RESULTS_DIR);
  if (suites.includes('claim')) await claimMain(RESULTS_DIR, TARGET);
  if (suites.includes('memory')) await memoryMain(RESULTS_DIR);
  if (suites.includes('dispatch')) await dispatchMain(RESULTS_DIR);
  if (suites.includes('steps')) await stepsMain(RESULTS_DIR);
  if (suites.includes('curve')) await curveMain(RESULTS_DIR);
  if (suites.includes('worker-cost')) await workerCostMain(RESULTS_DIR);
  if (suites.includes('lease-enforcement')) await leaseEnforcementMain(RESULTS_DIR);
  if (suites.includes('peer')) await peerMain(RESULTS_DIR);
  if (suites.includes('journal')) await journalMain(RESULTS_DIR);
  if (suites.includes('plane-cost')) await planeCostMain(RESULTS_DIR);
  if (suites.includes('soak')) await soakMain(RESULTS_DIR);
  if (suites.includes('bundle')) await bundleMain(RESULTS_DIR);
  if (suites.includes('redaction')) await redactionMain(RESULTS_DIR);
}

class UsageError extends Error {}

const SUITES = [
  'heartbeat',
  'heartbeat-mtls',
  'claim',
  'memory',
  'dispatch',
  'steps',
  'curve',
  'worker-cost',
  'lease-enforcement',
  'peer',
  'journal',
  'plane-cost',
  'soak',
  'bundle',
  'redaction',
];

const USAGE = `usage: npm run bench [-- <group> ...]   (node dist/bench/run.js [<group> ...])
Measures and writes bench/results/; groups (default: all, or QL_BENCH_SUITES=a,b):
  ${SUITES.join(', ')}
Settings are QL_BENCH_* environment variables: bench/README.md and the top of bench/run.ts.
PostgreSQL groups use QL_BENCH_PG_URL (default postgres://postgres@127.0.0.1:5432/postgres).`;

/** Groups named as arguments (`npm run bench -- memory dispatch`), else QL_BENCH_SUITES, else all. */
function selectedSuites(args: readonly string[], env: string | undefined): string[] {
  const named = args.length ? args : (env || SUITES.join(',')).split(',');
  const suites = named.map((x) => x.trim()).filter(Boolean);
  const unknown = suites.filter((s) => !SUITES.includes(s));
  if (unknown.length) throw new UsageError(`QL_BENCH_SUITES: unknown bench group(s) ${unknown.join(', ')}`);
  return suites;
}

main().catch((error: unknown) => {
  if (error instanceof UsageError) {
    process.stderr.write(`${error.message}\n\n${USAGE}\n`);
    process.exitCode = 2;
    return;
  }
  console.error(error);
  process.exitCode = 1;
});
