import { Logger } from '@nestjs/common';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { ClaimConfig, ClaimRow, benchClaimPostgres, benchClaimSqlite } from './claim';
import { envNumber } from './lib/measure';
import { planeSqliteCacheKiB } from './lib/plane';
import { BenchPostgresDatabase, createBenchDatabase, redactUrl } from './lib/postgres-admin';
import { Align, fmtInt, fmtPct, machineInfo, markdownTable, memoryInfo, textTable } from './lib/report';
import { rawSamplesLine, writeResultJson } from './lib/results';

function list(name: string, fallback: string): number[] {
  return (process.env[name] || fallback).split(',').map((s) => {
    const n = Number(s.trim());
    if (!Number.isInteger(n) || n < 1) throw new Error(`${name}: bad value "${s}"`);
    return n;
  });
}

/** The claim benchmark: runs both dialects, prints the table, writes JSON + markdown to `resultsDir`. */
export async function claimMain(resultsDir: string, target: number): Promise<void> {
  // The service logs through Nest's Logger; in a bench nothing is printed (as at QL_LOG_LEVEL=warn).
  Logger.overrideLogger(['warn', 'error']);
  const started = new Date();
  const machine = machineInfo(started);
  const rounds = Math.floor(envNumber('QL_BENCH_ROUNDS', 3, 2));
  const claims = Math.floor(envNumber('QL_BENCH_CLAIMS', 900, 10));
  const config: ClaimConfig = {
    concurrencies: list('QL_BENCH_CONCURRENCY', '1,8,32'),
    backlogs: list('QL_BENCH_BACKLOGS', '1000,100000'),
    rounds,
    claimsPerSample: () => claims,
    warmupClaims: 100,
    peer: process.env.QL_BENCH_PEER !== '0',
    log: (line) => console.log(line),
  };
  const dialects = (process.env.QL_BENCH_DIALECTS || 'sqlite,postgres').split(',').map((s) => s.trim());
  const pgUrl = process.env.QL_BENCH_PG_URL || 'postgres://postgres@127.0.0.1:5432/postgres';
  console.log(
    `claim bench: ${claims} claims per sample (after ${config.warmupClaims} warm-up), ${rounds} rounds, ` +
      `B = ${config.backlogs.join(', ')}, N = ${config.concurrencies.join(', ')}; load ${machine.loadAvgAtStart}` +
      (dialects.includes('sqlite') ? `; SQLite page cache ${planeSqliteCacheKiB()} KiB` : ''),
  );
  const rows: ClaimRow[] = [];
  const notes: string[] = [];
  if (dialects.includes('sqlite')) {
    const dir = mkdtempSync(join(tmpdir(), 'ql-bench-claim-'));
    try {
      rows.push(...(await benchClaimSqlite(dir, config)));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
  if (dialects.includes('postgres')) {
    const made: BenchPostgresDatabase[] = [];
    try {
      rows.push(
        ...(await benchClaimPostgres(async () => {
          const db = await createBenchDatabase(pgUrl);
          made.push(db);
          return db.url;
        }, config)),
      );
    } catch (error) {
      const note = `PostgreSQL claim rows incomplete on ${redactUrl(pgUrl)}: ${(error as Error).message}`;
      console.log(note);
      notes.push(note);
    } finally {
      for (const db of made) await db.drop().catch(() => undefined);
    }
  }

  const header = [
    'dialect',
    'backlog',
    'N',
    'service claims/s',
    'ceiling claims/s',
    'ratio',
    'paired',
    'target',
    'result',
    'CPU µs/claim service / ceiling',
    'graphile jobs/s',
    'service / graphile',
    'paired service / graphile',
    'unbatched claims/s',
    'paired service / unbatched',
  ];
  const align: Align[] = header.map((_, i) => (i === 0 || i === 8 ? 'left' : 'right'));
  const table = rows.map((r) => {
    const ratio = r.median.service / r.median.ceiling;
    return [
      r.dialect,
      fmtInt(r.backlog),
      String(r.concurrency),
      fmtInt(r.median.service),
      fmtInt(r.median.ceiling),
      fmtPct(ratio),
      fmtPct(r.pairedRatio),
      fmtPct(target),
      ratio >= target ? 'pass' : 'FAIL',
      `${r.cpuUsPerOp.service.toFixed(0)} / ${r.cpuUsPerOp.ceiling.toFixed(0)}`,
      r.peer ? fmtInt(r.peer.jobsPerSecond) : '—',
      r.peer ? fmtPct(r.median.service / r.peer.jobsPerSecond) : '—',
      r.peer ? fmtPct(r.peer.pairedRatio) : '—',
      r.unbatched ? fmtInt(r.unbatched.claimsPerSecond) : '—',
      r.unbatched ? `${r.unbatched.pairedRatio.toFixed(2)} ×` : '—',
    ];
  });
  const memory = memoryInfo();
  const loadAtEnd = loadavg()
    .map((l) => l.toFixed(2))
    .join(' / ');
  console.log('');
  console.log(textTable(header, table, align));
  for (const n of notes) console.log(n);

  const jsonPath = writeResultJson(resultsDir, 'claim', started, {
    benchmark: 'claim-throughput',
    target,
    config: { ...config, claimsPerSample: claims, log: undefined },
    machine,
    memory,
    notes,
    loadAtEnd,
    rows: rows.map((r) => ({ ...r, ratio: r.median.service / r.median.ceiling })),
  });
  const markdown = [
    '# Claim throughput: pull → committed lease, vs. the bare claim transaction and graphile-worker',
    '',
    `Run ${machine.date} — node ${machine.node}, ${machine.cpuCount} × ${machine.cpuModel}, 1-min load at start ` +
      `${machine.loadAvgAtStart}; 1 / 5 / 15-min load at the end ${loadAtEnd} (2 cores, shared with other work).`,
    '',
    `Medians of ${rounds} alternated samples; each sample starts from a full backlog, warms up with ` +
      `${config.warmupClaims} claims, then times ${claims} committed claims by N concurrent pullers (one worker ` +
      'session each). `service` is `LeasesService.offers` (everything the ingress does for a pull except HTTP/TLS); ' +
      '`ceiling` is the bare claim transaction (lock worker, take the first queued run with SKIP LOCKED, insert ' +
      'attempt and lease, move the run, append its two events) issued raw through the same driver and pool size; ' +
      '`graphile` is graphile-worker 0.16.6 completing no-op jobs at concurrency N over the same backlog in the same ' +
      'database, sampled in the same rounds as ours (the three variants rotate their order round by round); between ' +
      'samples its queue is topped back up to B and ours reset to B (neither timed, neither scanning the backlog). ' +
      '`paired` is the median of service/ceiling within a round; `paired service / graphile` the median of ' +
      'service/graphile within a round, beside the ratio of the medians. `unbatched` (PostgreSQL) is the same ' +
      'service with claim batching off (`QL_CLAIM_BATCH_MAX=1`, ADR 0027), sampled in the same rounds; ' +
      '`paired service / unbatched` the median of their ratio within a round. The machine is shared: read the ratios.',
    '',
    markdownTable(header, table, align),
    '',
    ...notes.map((n) => `${n}\n`),
    `memory (informational): RSS ${memory.rssMiB} MiB after the run, peak ${memory.peakRssMiB} MiB.`,
    '',
    rawSamplesLine(resultsDir, jsonPath),
    '',
  ].join('\n');
  writeFileSync(join(resultsDir, 'latest-claim.md'), markdown);
  console.log(`results: ${relative(process.cwd(), jsonPath)}`);
}
