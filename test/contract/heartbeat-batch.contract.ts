import {
  FencedError,
  HeartbeatAnswer,
  HeartbeatBatcher,
  HeartbeatCommand,
  ValidationError,
} from '@ql/domain';
import {
  HEARTBEAT_BATCH_SQL,
  SqlActivationRepository,
  SqlOperationalStatsRepository,
  SqlWorkerCertificateRepository,
} from '@ql/persistence';
import { createIdGenerator } from '@ql/contracts';
import { ControlPlaneConfig, loadConfig } from '../../apps/control-plane/src/config/config';
import { CertificateForks } from '../../apps/control-plane/src/identity/certificate-forks';
import { SessionWireVersions } from '../../apps/control-plane/src/identity/session-wire-versions';
import { IngressRateLimit } from '../../apps/control-plane/src/identity/ingress-rate-limit';
import { WorkerPrincipal } from '../../apps/control-plane/src/identity/worker-principal';
import { ControlPlaneMetrics } from '../../apps/control-plane/src/metrics/control-plane-metrics';
import { RegistryService } from '../../apps/control-plane/src/registry/registry.service';
import { newSessionId, snapshot } from '../support/fixtures';
import { DispatchFixture, DispatchTarget, SESSION_LEASE, offered } from './dispatch.contract';

type Worker = Awaited<ReturnType<DispatchFixture['worker']>>;

/** Batched heartbeats (ADR 0018): one contract, run on SQLite and on PostgreSQL. */
export function describeHeartbeatBatchContract(dialect: string, makeTarget: () => DispatchTarget): void {
  describe(`batched heartbeats contract (${dialect})`, () => {
    let target: DispatchTarget;
    let f: DispatchFixture;
    let n = 0;
    const workerId = (name = 'hb') => `${name}-${dialect}-${++n}`;

    beforeAll(async () => {
      target = makeTarget();
      f = new DispatchFixture(await target.open());
    });
    afterAll(async () => {
      await target.dispose();
    });

    const call = (w: Worker, expectedVersion: number, availableSlots: number, generation = 1) => ({
      workerId: w.workerId,
      sessionId: w.sessionId,
      fence: { generation, expectedVersion },
      leaseMs: SESSION_LEASE,
      availableSlots,
    });
    const batcher = (windowMs: number, maxSize: number, cancelLimit = 16) =>
      new HeartbeatBatcher(f.sessions, { windowMs, maxSize, cancelLimit });
    const settle = (p: Promise<HeartbeatAnswer>) =>
      p.then(
        (value) => ({ value }),
        (error: unknown) => ({ error }),
      );
    const rowOf = (w: Worker) =>
      f.db.one<Record<string, unknown>>('SELECT * FROM workers WHERE worker_id = :w', { w: w.workerId });
    /**
     * Claims `count` runs for `w`; the last `cancelled` of them (later attempt ids than the others) get
     * a cancel request. Their attempt ids, sorted.
     */
    const cancelRequested = async (w: Worker, count: number, cancelled: number) => {
      const task = await f.task();
      const runs = await f.queue(task.id, count);
      const ids: string[] = [];
      for (const [i, run] of runs.entries()) {
        const offer = offered(await f.pull(w));
        if (i >= count - cancelled) {
          await f.runs.requestCancel(run.id, { actor: 't', action: 'cancel', target: run.id });
          ids.push(offer.attempt.id);
        }
      }
      return ids.sort();
    };

    it('N concurrent heartbeats land in one statement; each caller gets its own answer, fenced ones their own 409', async () => {
      const ok = await f.worker(workerId('ok'));
      const withCancels = await f.worker(workerId('cancels'));
      const cancels = await cancelRequested(withCancels, 3, 2);
      const draining = await f.worker(workerId('draining'));
      await f.sessions.drainWorker(draining.workerId, { actor: 't', action: 'drain', target: 'w' });
      const replay = await f.worker(workerId('replay'));
      const replayed = await f.sessions.heartbeat(call(replay, 0, 2));
      const stale = await f.worker(workerId('stale'));
      await f.sessions.heartbeat(call(stale, 0, 1));
      const wrongGeneration = await f.worker(workerId('generation'));
      const replaced = await f.worker(workerId('replaced'));
      await f.sessions.register({
        workerId: replaced.workerId,
        sessionId: newSessionId(),
        snapshot: snapshot(),
        leaseMs: SESSION_LEASE,
      });
      const over = await f.worker(workerId('over'), 2);
      const unknown = { ...ok, workerId: workerId('nobody') };

      const calls: [string, HeartbeatCommand][] = [
        ['ok', call(ok, 0, 3)],
        ['withCancels', call(withCancels, 0, 1)],
        ['draining', call(draining, 0, 4)],
        ['replay', call(replay, 0, 2)],
        ['stale', call(stale, 0, 3)],
        ['wrongGeneration', call(wrongGeneration, 0, 1, 2)],
        ['replaced', call(replaced, 0, 1)],
        ['over', call(over, 0, 3)],
        ['unknown', call(unknown, 0, 1)],
      ];
      const fenced = [stale, wrongGeneration, replaced, over];
      const before = await Promise.all(fenced.map(rowOf));
      const statements = f.db.statements.value;
      // A window far longer than the test: the batch goes when it is full, so all calls share it.
      const hb = batcher(60_000, calls.length, 1);
      const answers = Object.fromEntries(
        await Promise.all(calls.map(async ([name, c]) => [name, await settle(hb.heartbeat(c))] as const)),
      );
      // One statement for the batch, then one explaining read per miss (replay and refusals: 6).
      expect(f.db.statements.value - statements).toBe(1 + 6);

      expect(answers.ok).toEqual({
        value: {
          session: expect.objectContaining({ workerId: ok.workerId, version: 1, availableSlots: 3 }),
          cancelAttemptIds: [],
        },
      });
      // Limit 1: the first of the two cancel-requested attempts, in attempt id order.
      expect(answers.withCancels).toEqual({
        value: {
          session: expect.objectContaining({ workerId: withCancels.workerId, version: 1, availableSlots: 1 }),
          cancelAttemptIds: cancels.slice(0, 1),
        },
      });
      expect(answers.draining).toEqual({
        value: {
          session: expect.objectContaining({
            workerId: draining.workerId,
            status: 'draining',
            availableSlots: 0,
          }),
          cancelAttemptIds: [],
        },
      });
      expect(answers.replay).toEqual({ value: { session: replayed, cancelAttemptIds: null } });
      const refusal = (name: string) => {
        const error = (answers[name] as { error?: unknown }).error;
        return error instanceof FencedError ? error.reason : error;
      };
      expect(refusal('stale')).toBe('version_mismatch');
      expect(refusal('wrongGeneration')).toBe('generation_mismatch');
      expect(refusal('replaced')).toBe('session_replaced');
      expect(refusal('unknown')).toBe('unknown_worker');
      expect(refusal('over')).toBeInstanceOf(ValidationError);
      // The refused rows are as they were; the accepted ones are what their callers were told.
      expect(await Promise.all(fenced.map(rowOf))).toEqual(before);
      for (const name of ['ok', 'withCancels', 'draining'] as const) {
        const { session } = (answers[name] as { value: HeartbeatAnswer }).value;
        expect((await f.sessions.findWorker(session.workerId))?.session).toEqual(session);
      }
    });

    it('the batch reaches each worker, and its leases, by key: no scan, however many workers there are', async () => {
      const template = await f.worker(workerId('template'));
      for (let i = 0; i < 8; i++) await cancelRequested(await f.worker(workerId('holder')), 4, 1);
      // 5,000 more workers, copies of one registered row under new ids and sessions.
      const columns = `disabled, generation, version, status, lease_expires_at, max_concurrent_runs,
        available_slots, registration_digest, capabilities_json, capabilities_digest, software_version,
        protocol_version, registered_at, last_seen_at, created_at`;
      const [series, uuid] =
        dialect === 'postgres'
          ? ['generate_series(1, 5000) AS s(i)', 'gen_random_uuid()']
          : [
              '(WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 5000) SELECT i FROM c) AS s',
              'lower(hex(randomblob(16)))',
            ];
      await f.db.run(
        `INSERT INTO workers (worker_id, session_id, ${columns})
         SELECT 'plan-' || s.i, ${uuid}, ${columns} FROM workers, ${series} WHERE worker_id = :w`,
        { w: template.workerId },
      );
      await f.db.run('ANALYZE');
      const batch = JSON.stringify(
        Array.from({ length: 64 }, (_, i) => ({
          ...{ w: `plan-${i + 1}`, s: template.sessionId, g: 1, v: 0, n: 1, l: SESSION_LEASE },
          k: 'heartbeat:1',
        })),
      );
      // PostgreSQL picks a sequential scan of a tiny table whatever its indexes: with scans priced out,
      // a scan left in the plan is a lookup no index serves.
      const plan = await f.db.transaction(async (tx) => {
        if (dialect === 'postgres') await tx.run('SET LOCAL enable_seqscan = off');
        return tx.many<Record<string, unknown>>(
          `${dialect === 'postgres' ? 'EXPLAIN (FORMAT JSON)' : 'EXPLAIN QUERY PLAN'} ${HEARTBEAT_BATCH_SQL[f.db.dialect]}`,
          { batch, no: false, yes: true, cancelLimit: 64 },
        );
      });
      if (dialect === 'postgres') {
        // Every read of a table is an index lookup on a key: an Index Cond (a full index scan has none).
        const reads: Record<string, unknown>[] = [];
        const walk = (node: Record<string, unknown>) => {
          if (node['Relation Name'] && node['Node Type'] !== 'ModifyTable') reads.push(node);
          for (const child of (node.Plans as Record<string, unknown>[] | undefined) ?? []) walk(child);
        };
        walk((plan[0]!['QUERY PLAN'] as { Plan: Record<string, unknown> }[])[0]!.Plan);
        expect(reads.map((r) => r['Relation Name']).sort()).toEqual(['run_leases', 'runs', 'workers']);
        for (const read of reads)
          expect({ read: read['Relation Name'], cond: typeof read['Index Cond'] }).toEqual({
            read: read['Relation Name'],
            cond: 'string',
          });
      } else {
        // Only the batch (json_each) and the few cancel intents of one session (c) are read whole.
        const details = plan.map((row) => String(row.detail));
        expect(details.filter((d) => /^SCAN (?!json_each|c$)/.test(d))).toEqual([]);
        expect(details.filter((d) => /^SEARCH (workers|l|r) USING/.test(d))).toHaveLength(3);
      }
    });

    it('the ingress answer carries the cancel intents, read with the write or, for a replay, after it', async () => {
      const w = await f.worker(workerId('service'));
      const cancels = await cancelRequested(w, 2, 1);
      const config = {
        sessionLeaseMs: SESSION_LEASE,
        heartbeatBatchWindowMs: 2,
        heartbeatBatchMax: 64,
      } as ControlPlaneConfig;
      const metrics = new ControlPlaneMetrics(new SqlOperationalStatsRepository(f.db));
      const registry = new RegistryService(
        f.sessions,
        new SqlActivationRepository(f.db),
        config,
        metrics,
        new IngressRateLimit(loadConfig({})),
        new CertificateForks(new SqlWorkerCertificateRepository(f.db, createIdGenerator()), metrics),
        new SessionWireVersions(f.sessions),
      );
      const principal = { workerId: w.workerId } as WorkerPrincipal;
      const body = { generation: 1, expectedVersion: 0, availableSlots: 1 };
      const first = await registry.heartbeat(principal, w.sessionId, body);
      expect(first).toMatchObject({ version: 1, cancelAttemptIds: cancels });
      // The answer was lost: the same call again is a replay, and says the same.
      expect(await registry.heartbeat(principal, w.sessionId, body)).toEqual(first);
    });

    it('a worker named twice in one batch: the second call sees the first one applied', async () => {
      const w = await f.worker(workerId());
      const statements = f.db.statements.value;
      const hb = batcher(60_000, 3);
      const [first, second, stale] = await Promise.all(
        [call(w, 0, 1), call(w, 1, 2), call(w, 0, 3)].map((c) => settle(hb.heartbeat(c))),
      );
      expect(first).toMatchObject({ value: { session: { version: 1, availableSlots: 1 } } });
      expect(second).toMatchObject({ value: { session: { version: 2, availableSlots: 2 } } });
      expect((stale as { error: FencedError }).error.reason).toBe('version_mismatch');
      // One statement per round, one explaining read for the stale call.
      expect(f.db.statements.value - statements).toBe(3 + 1);
    });

    it('the calls of one window share a batch; window 0 sends each alone', async () => {
      const workers = await Promise.all([1, 2, 3].map(() => f.worker(workerId())));
      let statements = f.db.statements.value;
      const windowed = batcher(20, 64);
      const answers = await Promise.all(workers.map((w) => windowed.heartbeat(call(w, 0, 1))));
      expect(answers.map((a) => [a.session.workerId, a.session.version])).toEqual(
        workers.map((w) => [w.workerId, 1]),
      );
      expect(f.db.statements.value - statements).toBe(1);
      statements = f.db.statements.value;
      const alone = batcher(0, 64);
      await Promise.all(workers.map((w) => alone.heartbeat(call(w, 1, 1))));
      expect(f.db.statements.value - statements).toBe(3);
    });
  });
}
