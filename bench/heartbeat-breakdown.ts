/**
 * Diagnostic companion of the heartbeat bench: where the distance between the repository heartbeat
 * and the raw single-row UPDATE goes. Not part of `npm run bench`; run it by hand:
 *
 *   npm run build && node dist/bench/heartbeat-breakdown.js
 *   QL_BENCH_DIALECTS=postgres QL_BENCH_CONCURRENCY=32 QL_BREAKDOWN_VARIANTS=repository \
 *     node --cpu-prof --cpu-prof-dir=/tmp/prof dist/bench/heartbeat-breakdown.js
 *
 * Variants, each step adding one thing the heartbeat does, all on the same rows and the same N:
 *   ceiling          UPDATE … SET version = version + 1 WHERE worker_id = ?   (raw)
 *   ceilingRepoConn  the same through the repository's own connection (SQLite only)
 *   ceilingLease     … plus lease_expires_at / last_seen_at (an indexed column before 0f8eb83) (raw)
 *   casVersion       the repository's heartbeat SQL with `RETURNING version` only (raw)
 *   casLean          … RETURNING only what the answer needs beyond the command (version, status,
 *                    lease, max runs, slots, digest); PostgreSQL: the lease as int8 epoch ms (raw)
 *   casSql           the repository's heartbeat SQL with its own RETURNING list; SQLite: `.get()` (raw)
 *   casSqlAll        SQLite: casSql through `.all()` instead of `.get()`, i.e. stepped to SQLITE_DONE
 *                    so the commit runs SQLite's WAL hook (auto-checkpoint) like `.run()` does
 *   repository       SqlWorkerSessionRepository.heartbeat
 * SQLite samples end with a timed WAL checkpoint (see `sqliteSettle` in heartbeat.ts) unless
 * QL_BREAKDOWN_NO_SETTLE=1, which shows how a variant that never checkpoints leaves the bill to the next.
 * QL_BREAKDOWN_DROP_LEASE_INDEX=1 drops workers_status_lease (if a migration still creates it) in the
 * run's database first, to show what the index costs: while it existed, every heartbeat changed an
 * indexed column, so no update was HOT on PostgreSQL.
 * PostgreSQL keeps one pool per kind for the whole level: with more than three variants a pool idles
 * past pg's 10 s idle timeout and reconnects in its next warm-up, inflating that variant's backend CPU.
 * Per variant: median ops/s and % of the ceiling, Node CPU µs/op and, on PostgreSQL, WAL bytes per
 * operation (server-wide, so a busy neighbour inflates it) and whether the update is HOT (exact:
 * pg_stat_xact_user_tables over 50 updates in a rolled-back transaction).
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { Pool } from 'pg';
import { createIdGenerator, systemClock } from '@ql/contracts';
import {
  PostgresDatabase,
  SqlWorkerSessionRepository,
  SqliteDatabase,
  compilePostgres,
  compileSqlite,
} from '@ql/persistence';
import {
  CEILING_SQL,
  LEASE_MS,
  sqliteSettle,
  Worker,
  captureHeartbeatSql,
  casParams,
  registerWorkers,
  repositoryOp,
} from './heartbeat';
import { MeasureWindow, Sample, Settle, closedLoops, envNumber, median } from './lib/measure';
import { createBenchDatabase } from './lib/postgres-admin';
import { fmtInt, fmtPct, textTable } from './lib/report';

const ALL = [
  'ceiling',
  'ceilingRepoConn',
  'ceilingLease',
  'casVersion',
  'casLean',
  'casSql',
  'casSqlAll',
  'repository',
] as const;
type Variant = (typeof ALL)[number];

interface Level {
  readonly ops: Partial<Record<Variant, (w: Worker) => () => Promise<unknown>>>;
  syncVersions(ws: Worker[]): Promise<void>;
  readonly settle?: Settle;
  /** PostgreSQL: current WAL insert position in bytes, and CPU µs its backends for this database used. */
  server?(): Promise<{ walBytes: bigint; backendCpuUs: Map<number, number> | undefined }>;
  /** PostgreSQL: fraction of 50 updates of this variant that were HOT. */
  hotFraction?(variant: Variant, w: Worker): Promise<number>;
}

interface Outcome {
  samples: Sample[];
  walBytesPerOp: number[];
  serverCpuUsPerOp: number[];
}

const window: MeasureWindow = {
  warmupMs: envNumber('QL_BENCH_WARMUP_SECONDS', 0.5, 0) * 1000,
  measureMs: envNumber('QL_BENCH_SECONDS', 2, 0.1) * 1000,
};
const rounds = Math.floor(envNumber('QL_BENCH_ROUNDS', 3, 1));
const concurrencies = (process.env.QL_BENCH_CONCURRENCY || '1,8,32').split(',').map(Number);
const dialects = (process.env.QL_BENCH_DIALECTS || 'sqlite,postgres').split(',');
const chosen = (process.env.QL_BREAKDOWN_VARIANTS || ALL.join(',')).split(',') as Variant[];
const pgUrl = process.env.QL_BENCH_PG_URL || 'postgres://postgres@127.0.0.1:5432/postgres';

/** The heartbeat SQL with another RETURNING list. */
function returning(text: string, list: string): string {
  const at = text.lastIndexOf('RETURNING');
  if (at < 0) throw new Error('heartbeat SQL has no RETURNING');
  return `${text.slice(0, at)}RETURNING ${list}`;
}

/** What a heartbeat answer needs that the command does not already carry (worker, session, generation). */
const LEAN = 'version, status, max_concurrent_runs, available_slots, registration_digest';
const dropLeaseIndex = process.env.QL_BREAKDOWN_DROP_LEASE_INDEX === '1';
const noSettle = process.env.QL_BREAKDOWN_NO_SETTLE === '1';

async function measure(dialect: string, workers: Worker[], level: Level): Promise<void> {
  const variants = chosen.filter((v) => level.ops[v]);
  const out = new Map<Variant, Outcome>(
    variants.map((v) => [v, { samples: [], walBytesPerOp: [], serverCpuUsPerOp: [] }]),
  );
  for (let round = 0; round < rounds; round++) {
    for (let i = 0; i < variants.length; i++) {
      const variant = variants[(i + round) % variants.length]!;
      await level.syncVersions(workers);
      const s0 = await level.server?.();
      const sample = await closedLoops(
        workers.map((w) => level.ops[variant]!(w)),
        window,
        level.settle,
      );
      const s1 = await level.server?.();
      const o = out.get(variant)!;
      o.samples.push(sample);
      if (s0 && s1) {
        o.walBytesPerOp.push(Number(s1.walBytes - s0.walBytes) / sample.totalOps);
        if (s0.backendCpuUs && s1.backendCpuUs) {
          // Backends that ended meanwhile (idle timeout of the other pool) drop out; new ones count whole.
          let used = 0;
          for (const [pid, us] of s1.backendCpuUs) used += us - (s0.backendCpuUs.get(pid) ?? 0);
          o.serverCpuUsPerOp.push(used / sample.totalOps);
        }
      }
    }
  }
  const ceiling = median(out.get('ceiling')?.samples.map((s) => s.opsPerSecond) ?? []);
  const rows: string[][] = [];
  for (const v of variants) {
    const o = out.get(v)!;
    const ops = median(o.samples.map((s) => s.opsPerSecond));
    await level.syncVersions(workers);
    const hot = level.hotFraction ? await level.hotFraction(v, workers[0]!) : undefined;
    rows.push([
      v,
      fmtInt(ops),
      fmtPct(ops / ceiling),
      median(o.samples.map((s) => s.processCpuUsPerOp)).toFixed(1),
      level.settle ? median(o.samples.map((s) => s.settleMs)).toFixed(1) : '—',
      level.settle ? median(o.samples.map((s) => s.detail?.walMiBAtEnd ?? 0)).toFixed(1) : '—',
      o.serverCpuUsPerOp.length ? median(o.serverCpuUsPerOp).toFixed(1) : '—',
      o.walBytesPerOp.length ? fmtInt(median(o.walBytesPerOp)) : '—',
      hot === undefined ? '—' : fmtPct(hot),
      o.samples
        .map(
          (s, i) =>
            `${Math.round(s.opsPerSecond)}${o.serverCpuUsPerOp[i] === undefined ? '' : `@${Math.round(o.serverCpuUsPerOp[i])}`}`,
        )
        .join(' '),
    ]);
  }
  console.log(`\n${dialect}  N=${workers.length}`);
  console.log(
    textTable(
      [
        'variant',
        'ops/s',
        '% ceiling',
        'node CPU µs/op',
        'final checkpoint ms',
        'WAL MiB at end',
        'backends CPU µs/op',
        'WAL B/op',
        'HOT',
        'samples ops/s[@backend µs/op]',
      ],
      rows,
      ['left', 'right', 'right', 'right', 'right', 'right', 'right', 'right', 'right', 'left'],
    ),
  );
}

async function sqlite(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'ql-bench-'));
  const path = join(dir, 'bench.sqlite');
  const db = await SqliteDatabase.open({ path }, systemClock, true);
  const raw = new BetterSqlite3(path, { timeout: 25 });
  try {
    raw.pragma('journal_mode = WAL');
    raw.pragma('synchronous = NORMAL');
    raw.pragma('foreign_keys = ON');
    if (dropLeaseIndex) raw.exec('DROP INDEX IF EXISTS workers_status_lease');
    const repo = new SqlWorkerSessionRepository(db, createIdGenerator());
    const ceiling = raw.prepare(CEILING_SQL);
    const ceilingRepoConn = db.native.prepare(CEILING_SQL);
    const ceilingLease = raw.prepare(
      `UPDATE workers SET version = version + 1, lease_expires_at = ?, last_seen_at = ? WHERE worker_id = ?`,
    );
    const readVersion = raw.prepare('SELECT version FROM workers WHERE worker_id = ?').pluck();
    for (const n of concurrencies) {
      const workers = await registerWorkers(repo, `bd-sqlite-n${n}`, n);
      const cas = compileSqlite(await captureHeartbeatSql(db, workers[0]!));
      const casFull = raw.prepare(cas.text);
      const casVersion = raw.prepare(returning(cas.text, 'version'));
      const casLean = raw.prepare(returning(cas.text, `${LEAN}, lease_expires_at`));
      const casOp = (stmt: BetterSqlite3.Statement) => (w: Worker) => async () => {
        const row = stmt.get({ ...casParams(w), no: 0, now: Date.now() }) as { version: number } | undefined;
        if (!row) throw new Error('CAS missed');
        w.version = row.version;
      };
      await measure('sqlite', workers, {
        ops: {
          ceiling: (w) => async () => ceiling.run(w.workerId),
          ceilingRepoConn: (w) => async () => ceilingRepoConn.run(w.workerId),
          ceilingLease: (w) => async () => {
            const now = Date.now();
            ceilingLease.run(now + LEASE_MS, now, w.workerId);
          },
          casVersion: casOp(casVersion),
          casLean: casOp(casLean),
          casSql: casOp(casFull),
          casSqlAll: (w) => async () => {
            const row = casFull.all({ ...casParams(w), no: 0, now: Date.now() })[0] as
              { version: number } | undefined;
            if (!row) throw new Error('CAS missed');
            w.version = row.version;
          },
          repository: repositoryOp(repo),
        },
        syncVersions: async (ws) => {
          for (const w of ws) w.version = readVersion.get(w.workerId) as number;
        },
        ...(noSettle ? {} : { settle: sqliteSettle(raw, path) }),
      });
    }
  } finally {
    raw.close();
    await db.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

async function postgres(): Promise<void> {
  const database = await createBenchDatabase(pgUrl);
  try {
    const admin = await PostgresDatabase.open({ url: database.url, poolSize: 1 }, true);
    if (dropLeaseIndex) await admin.run('DROP INDEX IF EXISTS workers_status_lease');
    await admin.close();
    for (const n of concurrencies) {
      const db = await PostgresDatabase.open({ url: database.url, poolSize: n }, false);
      const raw = new Pool({ connectionString: database.url, max: n });
      raw.on('error', () => undefined);
      try {
        const repo = new SqlWorkerSessionRepository(db, createIdGenerator());
        const workers = await registerWorkers(repo, `bd-pg-n${n}`, n);
        const cas = compilePostgres(await captureHeartbeatSql(db, workers[0]!));
        const texts: Partial<Record<Variant, string>> = {
          ceiling: CEILING_SQL.replace('?', '$1'),
          ceilingLease:
            `UPDATE workers SET version = version + 1, lease_expires_at = clock_timestamp() + interval '1 day', ` +
            `last_seen_at = clock_timestamp() WHERE worker_id = $1`,
          casVersion: returning(cas.text, 'version'),
          // lease as epoch ms (int8), so the driver does not parse a timestamptz into a Date
          casLean: returning(
            cas.text,
            `${LEAN}, (extract(epoch FROM lease_expires_at) * 1000)::int8 AS lease_ms`,
          ),
          casSql: cas.text,
        };
        const values = (v: Variant, w: Worker) => {
          if (v === 'ceiling' || v === 'ceilingLease') return [w.workerId];
          const p = casParams(w);
          return cas.names.map((name) => p[name]);
        };
        const rawOp = (v: Variant) => (w: Worker) => async () => {
          const r = await raw.query<{ version?: string }>({
            name: `bd_${v}`,
            text: texts[v]!,
            values: values(v, w),
          });
          if (r.rowCount !== 1) throw new Error(`${v} missed`);
          if (r.rows[0]?.version !== undefined) w.version = Number(r.rows[0].version);
        };
        await measure('postgres', workers, {
          ops: {
            ceiling: rawOp('ceiling'),
            ceilingLease: rawOp('ceilingLease'),
            casVersion: rawOp('casVersion'),
            casLean: rawOp('casLean'),
            casSql: rawOp('casSql'),
            repository: repositoryOp(repo),
          },
          syncVersions: async (ws) => {
            for (const w of ws) {
              const r = await raw.query<{ version: string }>(
                'SELECT version FROM workers WHERE worker_id = $1',
                [w.workerId],
              );
              w.version = Number(r.rows[0]!.version);
            }
          },
          server: async () => {
            const r = await raw.query<{ b: string; pids: number[] }>(
              `SELECT pg_current_wal_insert_lsn() - '0/0' AS b,
                 (SELECT array_agg(pid) FROM pg_stat_activity WHERE datname = current_database()) AS pids`,
            );
            return { walBytes: BigInt(r.rows[0]!.b), backendCpuUs: backendsCpuUs(r.rows[0]!.pids) };
          },
          hotFraction: async (v, w) => {
            if (v === 'repository') v = 'casSql';
            const client = await raw.connect();
            try {
              // Since PostgreSQL 15 the xact view also shows this backend's not yet flushed counts of
              // earlier transactions, so take the difference across the 50 updates.
              const counts = async () => {
                const r = await client.query<{ upd: string; hot: string }>(
                  `SELECT n_tup_upd AS upd, n_tup_hot_upd AS hot FROM pg_stat_xact_user_tables WHERE relname = 'workers'`,
                );
                return { upd: Number(r.rows[0]!.upd), hot: Number(r.rows[0]!.hot) };
              };
              await client.query('BEGIN');
              const before = await counts();
              for (let i = 0; i < 50; i++) {
                const r = await client.query<{ version?: string }>({ text: texts[v]!, values: values(v, w) });
                if (r.rows[0]?.version !== undefined) w.version = Number(r.rows[0].version);
              }
              const after = await counts();
              await client.query('ROLLBACK');
              return (after.hot - before.hot) / (after.upd - before.upd);
            } finally {
              client.release();
            }
          },
        });
      } finally {
        await raw.end();
        await db.close();
      }
    }
  } finally {
    await database.drop();
  }
}

/**
 * utime + stime of these PostgreSQL backends from /proc (the server on this machine), in µs; undefined
 * when /proc does not show them (a remote server). Clock ticks are 100 Hz on Linux.
 */
function backendsCpuUs(pids: readonly number[]): Map<number, number> | undefined {
  const used = new Map<number, number>();
  for (const pid of pids) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      used.set(pid, (Number(fields[11]) + Number(fields[12])) * 10_000); // fields 14 and 15 of stat(5)
    } catch {
      return undefined;
    }
  }
  return used;
}

async function main(): Promise<void> {
  console.log(
    `breakdown: ${window.measureMs / 1000}s + ${window.warmupMs / 1000}s warm-up, ${rounds} rounds`,
  );
  if (dialects.includes('sqlite')) await sqlite();
  if (dialects.includes('postgres')) await postgres();
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
