/**
 * Diagnostic, not part of `npm run bench`: where the SQLite claim's distance to its ceiling goes.
 * `node dist/bench/claim-breakdown.js` (after `npm run build`). Variants, alternated, on one database
 * reset to the same backlog before each sample (as in bench/claim.ts):
 *   ceiling     the bare claim transaction (bench/claim.ts)
 *   sameSql     the repository's own claim statements, copied from libs/persistence/src/lease.repository.ts
 *               and run-sql.ts at the time of writing (named parameters; since ADR 0025 only the slot
 *               reservation has a RETURNING list on SQLite), issued raw through better-sqlite3 on the
 *               adapter's connection: what the SQL costs without the TypeScript
 *   repository  SqlLeaseRepository.claim
 *   service     LeasesService.offers (adds the body parse, token digest, offer projection)
 *   sameSqlReturning (QL_BREAKDOWN_RETURNING=1) the same statements with the lease insert and the run's
 *               move returning their rows, as before ADR 0025 (SQLite buffers a write's RETURNING rows)
 * Environment: QL_BREAKDOWN_BACKLOG (default 3000), QL_BREAKDOWN_CLAIMS (900), QL_BREAKDOWN_ROUNDS (5).
 * If the repository's statements change, update `sameSql` with them.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Logger } from '@nestjs/common';
import { createIdGenerator, systemClock } from '@ql/contracts';
import { IdGenerator, leaseTokenDigest } from '@ql/domain';
import { SqlLeaseRepository, SqliteDatabase } from '@ql/persistence';
import {
  BenchWorker,
  ClaimOp,
  LEASE_MS,
  reset,
  sample,
  seed,
  serviceOp,
  settle,
  sqliteCeiling,
} from './claim';
import { envNumber, median } from './lib/measure';

function sameSqlOp(db: SqliteDatabase, ids: IdGenerator, returning = false): ClaimOp {
  const raw = db.native;
  const reserve = raw.prepare(`UPDATE workers SET active_leases = active_leases + 1
    WHERE worker_id = :workerId AND session_id = :sessionId AND generation = :generation
      AND version = :expectedVersion AND disabled = 0 AND status <> 'offline' AND lease_expires_at > :now
      AND status = 'online' AND active_leases < max_concurrent_runs AND active_leases < available_slots
    RETURNING capabilities_digest, active_leases, max_concurrent_runs, available_slots, :now AS now`);
  const head =
    raw.prepare(`SELECT id, version, event_seq, placement_json, priority, queue_order, attempt_count,
      current_attempt_id, task_id, revision, spec_digest
    FROM runs WHERE status = 'queued' ORDER BY priority DESC, queue_order, id LIMIT :page`);
  const attempt = raw.prepare(`INSERT INTO attempts (id, run_id, attempt_no, status, version, worker_id,
      lease_generation, created_at, updated_at)
    VALUES (:id, :runId, :attemptNo, 'claimed', 0, :workerId, 1, :now, :now)`);
  const lease =
    raw.prepare(`INSERT INTO run_leases (attempt_id, lease_generation, offer_id, run_id, worker_id,
      session_id, session_generation, version, token_digest, state, expires_at, claimed_at)
    VALUES (:attemptId, 1, :offerId, :runId, :workerId, :sessionId, :sessionGeneration, 0, :digest, 'active',
      (:now + :leaseMs), :now)
    ON CONFLICT (offer_id) DO NOTHING RETURNING expires_at, claimed_at`);
  const move = raw.prepare(`UPDATE runs SET status = :to, version = version + 1, event_seq = event_seq + :n,
      updated_at = :now, attempt_count = :attemptCount, current_attempt_id = :currentAttemptId
    WHERE id = :id AND version = :version RETURNING event_seq`);
  const events = raw.prepare(`INSERT INTO run_events (run_id, seq, type, attempt_id, at, detail)
    VALUES (:runId, :s0, :t0, :a0, :now, :d0), (:runId, :s1, :t1, :a1, :now, :d1)`);
  const strip = (st: string) => st.replace(/\s+RETURNING[\s\S]*$/, '');
  const leaseRun = raw.prepare(strip(lease.source));
  const moveRun = raw.prepare(strip(move.source));
  const digest = leaseTokenDigest('x'.repeat(43));
  return async (w) => {
    raw.exec('BEGIN IMMEDIATE');
    try {
      const now = Date.now();
      const base = { workerId: w.workerId, sessionId: w.sessionId, now };
      const fence = { ...base, generation: w.generation, expectedVersion: w.version };
      if (!reserve.all(fence)[0]) throw new Error('no slot');
      const run = head.get({ page: 1 }) as { id: string; version: number; event_seq: number };
      const attemptId = ids.uuidV7();
      attempt.run({ id: attemptId, runId: run.id, attemptNo: 1, workerId: w.workerId, now });
      (returning ? lease.all.bind(lease) : leaseRun.run.bind(leaseRun))({
        ...base,
        attemptId,
        offerId: ids.uuidV7(),
        runId: run.id,
        sessionGeneration: w.generation,
        digest,
        leaseMs: LEASE_MS,
      });
      const moveParams = {
        to: 'dispatching',
        n: 2,
        now,
        attemptCount: 1,
        currentAttemptId: attemptId,
        id: run.id,
        version: run.version,
      };
      // Without RETURNING the sequence is known from the head's row (the only writer read it).
      const moved = returning
        ? (move.all(moveParams)[0] as { event_seq: number })
        : (moveRun.run(moveParams), { event_seq: run.event_seq + 2 });
      const detail = JSON.stringify({ attemptNo: 1, leaseGeneration: 1, workerId: w.workerId });
      events.run({
        runId: run.id,
        now,
        s0: moved.event_seq - 1,
        t0: 'run.dispatching',
        a0: attemptId,
        d0: null,
        s1: moved.event_seq,
        t1: 'attempt.claimed',
        a1: attemptId,
        d1: detail,
      });
      raw.exec('COMMIT');
    } catch (error) {
      if (raw.inTransaction) raw.exec('ROLLBACK');
      throw error;
    }
  };
}

function repositoryOp(db: SqliteDatabase, ids: IdGenerator): ClaimOp {
  const leases = new SqlLeaseRepository(db, ids);
  const digest = leaseTokenDigest('x'.repeat(43));
  return async (w: BenchWorker) => {
    const result = await leases.claim({
      workerId: w.workerId,
      sessionId: w.sessionId,
      fence: { generation: w.generation, expectedVersion: w.version },
      software: { softwareVersion: '0.1.0', wireVersion: 2 },
      offerId: ids.uuidV7(),
      tokenDigest: digest,
      leaseMs: LEASE_MS,
      preferenceHoldMs: 0,
    });
    if (result.kind !== 'offered') throw new Error(`repository pull went idle: ${result.reason}`);
  };
}

async function main(): Promise<void> {
  Logger.overrideLogger(['warn', 'error']);
  const backlog = envNumber('QL_BREAKDOWN_BACKLOG', 3000, 1100);
  const claims = Math.min(envNumber('QL_BREAKDOWN_CLAIMS', 900, 10), 924);
  const rounds = envNumber('QL_BREAKDOWN_ROUNDS', 5, 2);
  const dir = mkdtempSync(join(tmpdir(), 'ql-claim-breakdown-'));
  try {
    const path = join(dir, 'claim.sqlite');
    const db = await SqliteDatabase.open({ path }, systemClock);
    const ids = createIdGenerator();
    const workers = await seed(db, ids, backlog, 1);
    const ceiling = sqliteCeiling(path, ids);
    const ops: Record<string, ClaimOp> = {
      ceiling: ceiling.op,
      sameSql: sameSqlOp(db, ids),
      ...(process.env.QL_BREAKDOWN_RETURNING ? { sameSqlReturning: sameSqlOp(db, ids, true) } : {}),
      repository: repositoryOp(db, ids),
      service: serviceOp(db, ids),
    };
    const names = Object.keys(ops);
    const results = new Map<string, { ops: number[]; cpu: number[] }>(
      names.map((n) => [n, { ops: [], cpu: [] }]),
    );
    for (let round = 0; round < rounds; round++) {
      const order = names.map((_, i) => names[(i + round) % names.length]!);
      for (const name of order) {
        await reset(db);
        const s = await sample(ops[name]!, workers, claims, 100, () => settle(db));
        results.get(name)!.ops.push(s.opsPerSecond);
        results.get(name)!.cpu.push(s.processCpuUsPerOp);
      }
    }
    const ceilingOps = median(results.get('ceiling')!.ops);
    console.log(
      `SQLite claim breakdown: backlog ${backlog}, ${claims} claims per sample, ${rounds} rounds, N = 1`,
    );
    for (const name of names) {
      const r = results.get(name)!;
      console.log(
        `${name.padEnd(10)} ${median(r.ops).toFixed(0).padStart(6)} claims/s  ${((median(r.ops) / ceilingOps) * 100).toFixed(1).padStart(5)} % of ceiling  ${median(r.cpu).toFixed(0).padStart(5)} µs CPU/claim`,
      );
    }
    ceiling.close();
    await db.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
