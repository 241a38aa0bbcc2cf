import { MtlsRow, benchMtls } from './heartbeat-mtls';
import { envNumber } from './lib/measure';
import { Dialect } from './lib/plane';
import { Align, fmtInt, fmtPct, machineInfo, markdownTable, textTable } from './lib/report';
import { writeResults } from './lib/results';

/** Target on PostgreSQL: heartbeats/s over mTLS ≥ 0.5 × the hello-world (issue 10). */
const TARGET = 0.5;

/**
 * Heartbeats over mTLS into one replica beside a Node `https` hello-world (heartbeat-mtls.ts).
 *   QL_BENCH_MTLS_WORKERS    workers, each with its own certificate and connection (default 256)
 *   QL_BENCH_MTLS_IN_FLIGHT  heartbeats in flight (default 32)
 */
export async function heartbeatMtlsMain(resultsDir: string): Promise<void> {
  const started = new Date();
  const machine = machineInfo(started);
  const seconds = envNumber('QL_BENCH_SECONDS', 3, 0.1);
  const warmup = envNumber('QL_BENCH_WARMUP_SECONDS', 0.5, 0);
  const rounds = Math.floor(envNumber('QL_BENCH_ROUNDS', 3, 2));
  const workers = Math.floor(envNumber('QL_BENCH_MTLS_WORKERS', 256, 1));
  const inFlight = Math.floor(envNumber('QL_BENCH_MTLS_IN_FLIGHT', 32, 1));
  const dialects = (process.env.QL_BENCH_DIALECTS || 'sqlite,postgres')
    .split(',')
    .map((s) => s.trim() as Dialect);
  console.log(
    `heartbeat mTLS bench: ${workers} workers (own certificate each), ${inFlight} in flight, ` +
      `${seconds}s counted + ${warmup}s warm-up per sample, ${rounds} rounds; load ${machine.loadAvgAtStart}`,
  );
  const rows: MtlsRow[] = [];
  await benchMtls(
    {
      workers,
      inFlight,
      rounds,
      window: { warmupMs: warmup * 1000, measureMs: seconds * 1000 },
      dialects,
      pgAdminUrl: process.env.QL_BENCH_PG_URL || 'postgres://postgres@127.0.0.1:5432/postgres',
      log: (line) => console.log(line),
    },
    rows,
  );
  const header = [
    'dialect',
    'batched heartbeats/s',
    'unbatched heartbeats/s',
    'hello-world req/s',
    'batched / hello',
    'unbatched / hello',
    'target',
    'result',
    'server CPU ms per 1,000: batched / unbatched / hello',
    'CPU ratio hello / batched',
  ];
  const align: Align[] = header.map((_, i) => (i === 0 || i === 7 ? 'left' : 'right'));
  const table = rows.map((r) => [
    r.dialect,
    fmtInt(r.median.batched),
    fmtInt(r.median.unbatched),
    fmtInt(r.median.hello),
    fmtPct(r.ratioToHello.batched),
    fmtPct(r.ratioToHello.unbatched),
    r.dialect === 'postgres' ? fmtPct(TARGET) : '',
    r.dialect === 'postgres' ? (r.ratioToHello.batched >= TARGET ? 'pass' : 'FAIL') : '',
    `${r.serverCpuMsPer1000.batched.toFixed(0)} / ${r.serverCpuMsPer1000.unbatched.toFixed(0)} / ${r.serverCpuMsPer1000.hello.toFixed(0)}`,
    fmtPct(r.serverCpuMsPer1000.hello / r.serverCpuMsPer1000.batched),
  ]);
  console.log('');
  console.log(textTable(header, table, align));
  writeResults(
    resultsDir,
    'heartbeat-mtls',
    started,
    {
      benchmark: 'heartbeat-mtls',
      target: TARGET,
      config: { seconds, warmup, rounds, workers, inFlight },
      machine,
      rows,
    },
    [
      '# Heartbeats over mTLS into one replica, beside a Node https hello-world',
      '',
      `Run ${machine.date} — node ${machine.node}, ${machine.platform}, ${machine.cpuCount} × ${machine.cpuModel}, ` +
        `1-min load at start ${machine.loadAvgAtStart}.`,
      '',
      `${workers} workers, each with its own certificate and keep-alive connection; ${inFlight} heartbeats in ` +
        `flight (closed loops, never two for one worker). Each target its own process: the control plane ` +
        `(own database, default pool) with batching as shipped (2 ms / 64) and off (0), and a Node \`https\` ` +
        `hello-world with the same server certificate and CA, client certificates required. Medians of ` +
        `${rounds} alternated samples of ${seconds} s (after ${warmup} s warm-up); ratios are paired within ` +
        `a round. The load generator is this process, on the same 2 cores: read the ratios. The server's own ` +
        `CPU per request (from /proc, warm-up included) is steadier than requests/s on a busy machine; ` +
        `hello / batched CPU is what the heartbeat ratio would be if both servers were CPU-bound.`,
      '',
      markdownTable(header, table, align),
      '',
    ],
  );
}
