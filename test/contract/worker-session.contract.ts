import { ValidationError, WorkerSessionRepository } from '@ql/domain';
import { createIdGenerator } from '@ql/contracts';
import { SqlDatabase, SqlOperationalStatsRepository, SqlWorkerSessionRepository } from '@ql/persistence';
import { snapshotDatabase } from '../support/db-snapshot';
import { expectFence as expectFenceOf, newSessionId, snapshot } from '../support/fixtures';

export interface ContractTarget {
  /** A freshly migrated, empty database. */
  open(): Promise<SqlDatabase>;
  /** Opens a second, independent connection (pool) to the same database. */
  openSecond(): Promise<SqlDatabase>;
  dispose(): Promise<void>;
}

const LEASE = 60_000;

/** Every refusal of the session repository is a session fence. */
const expectFence = (promise: Promise<unknown>, reason: string) => expectFenceOf(promise, 'session', reason);

/** One contract, run on SQLite and on PostgreSQL (R-REG-3..7). */
export function describeWorkerSessionContract(dialect: string, makeTarget: () => ContractTarget): void {
  describe(`WorkerSessionRepository contract (${dialect})`, () => {
    let target: ContractTarget;
    let db: SqlDatabase;
    let repo: WorkerSessionRepository;
    const ids = createIdGenerator();

    beforeAll(async () => {
      target = makeTarget();
      db = await target.open();
      repo = new SqlWorkerSessionRepository(db, ids);
    });
    afterAll(async () => {
      await target.dispose();
    });

    let n = 0;
    const workerId = () => `worker-${dialect}-${++n}`;
    const register = (w: string, s: string, leaseMs = LEASE, snap = snapshot()) =>
      repo.register({ workerId: w, sessionId: s, snapshot: snap, leaseMs });
    const cmd = (w: string, s: string, generation: number, expectedVersion: number, leaseMs = LEASE) => ({
      workerId: w,
      sessionId: s,
      fence: { generation, expectedVersion },
      leaseMs,
    });

    it('first registration is generation 1, version 0, online with a future lease', async () => {
      const w = workerId();
      const s = newSessionId();
      const result = await register(w, s);
      expect(result.outcome).toBe('created');
      expect(result.session).toMatchObject({
        workerId: w,
        sessionId: s,
        generation: 1,
        version: 0,
        status: 'online',
      });
      expect(result.session.leaseExpiresAt).toBeGreaterThan(Date.now() + LEASE / 2);
      const stored = await repo.findWorker(w);
      expect(stored?.session).toEqual(result.session);
      expect(stored?.capabilitiesDigest).toBe(snapshot().capabilities.digest);
    });

    it('records the certificate fingerprint each session registered with (ADR 0045 §4)', async () => {
      const w = workerId();
      const [first, second, unrecorded] = [newSessionId(), newSessionId(), newSessionId()];
      const [a, b] = ['a'.repeat(64), 'b'.repeat(64)];
      await repo.register({
        workerId: w,
        sessionId: first,
        snapshot: snapshot(),
        leaseMs: LEASE,
        certificateFingerprint: a,
      });
      await repo.register({
        workerId: w,
        sessionId: second,
        snapshot: snapshot(),
        leaseMs: LEASE,
        certificateFingerprint: b,
      });
      expect(await repo.sessionCertificate(first)).toBe(a);
      expect(await repo.sessionCertificate(second)).toBe(b);
      // A replay writes nothing: the fingerprint stays the first one's.
      await repo.register({
        workerId: w,
        sessionId: second,
        snapshot: snapshot(),
        leaseMs: LEASE,
        certificateFingerprint: a,
      });
      expect(await repo.sessionCertificate(second)).toBe(b);
      await register(workerId(), unrecorded);
      expect(await repo.sessionCertificate(unrecorded)).toBeNull();
      expect(await repo.sessionCertificate(newSessionId())).toBeNull();
    });

    it('same session and content is an idempotent replay; different content is a 409 conflict', async () => {
      const w = workerId();
      const s = newSessionId();
      const first = await register(w, s);
      const replay = await register(w, s);
      expect(replay).toEqual({ outcome: 'replayed', session: first.session });
      await expectFence(
        register(w, s, LEASE, snapshot({ maxConcurrentRuns: 8, availableSlots: 8 })),
        'session_content_mismatch',
      );
      expect((await repo.findWorker(w))?.session).toEqual(first.session);
    });

    it('a new session replaces the old one; the old one is fenced for ever', async () => {
      const w = workerId();
      const s1 = newSessionId();
      const s2 = newSessionId();
      const first = await register(w, s1);
      const hb = await repo.heartbeat({ ...cmd(w, s1, 1, 0), availableSlots: 2 });
      const second = await register(w, s2);
      expect(second.outcome).toBe('replaced');
      expect(second.session.generation).toBe(2);
      expect(second.session.version).toBeGreaterThan(hb.version);
      expect(first.session.generation).toBe(1);
      await expectFence(
        repo.heartbeat({ ...cmd(w, s1, 1, hb.version), availableSlots: 1 }),
        'session_replaced',
      );
      await expectFence(register(w, s1), 'session_fenced');
      await expectFence(repo.drain(cmd(w, s1, 1, hb.version)), 'session_replaced');
    });

    it('heartbeat is a CAS on version that extends the lease and reports slots', async () => {
      const w = workerId();
      const s = newSessionId();
      const { session } = await register(w, s, 5_000);
      const next = await repo.heartbeat({ ...cmd(w, s, 1, session.version), availableSlots: 3 });
      expect(next.version).toBe(session.version + 1);
      expect(next.availableSlots).toBe(3);
      expect(next.leaseExpiresAt).toBeGreaterThan(session.leaseExpiresAt);
      // The same fence with another body is stale (the very same call is a replay: see below).
      await expectFence(
        repo.heartbeat({ ...cmd(w, s, 1, session.version), availableSlots: 2 }),
        'version_mismatch',
      );
      await expectFence(
        repo.heartbeat({ ...cmd(w, s, 2, next.version), availableSlots: 3 }),
        'generation_mismatch',
      );
      const error = await repo
        .heartbeat({ ...cmd(w, s, 1, next.version), availableSlots: 5 })
        .catch((e) => e);
      expect(error).toBeInstanceOf(ValidationError);
      expect((await repo.findWorker(w))?.session).toEqual(next);
    });

    it('a heartbeat stores the journal records waiting for an operator; stats count them; a new session starts at 0 (ADR 0029)', async () => {
      const stats = new SqlOperationalStatsRepository(db);
      const base = (await stats.counts()).recoveryRequired;
      const w = workerId();
      const s = newSessionId();
      await register(w, s);
      expect((await repo.findWorker(w))?.recoveryRequired).toBe(0);
      const hb = await repo.heartbeat({ ...cmd(w, s, 1, 0), availableSlots: 1, recoveryRequired: 2 });
      expect((await repo.findWorker(w))?.recoveryRequired).toBe(2);
      expect((await stats.counts()).recoveryRequired).toEqual({
        workers: base.workers + 1,
        records: base.records + 2,
      });
      // The count is part of the call: the same fence with another count is not a replay of it.
      await expectFence(
        repo.heartbeat({ ...cmd(w, s, 1, 0), availableSlots: 1, recoveryRequired: 1 }),
        'version_mismatch',
      );
      await expect(
        repo.heartbeat({ ...cmd(w, s, 1, 0), availableSlots: 1, recoveryRequired: 2 }),
      ).resolves.toEqual(hb);
      // Absent means none: the operator cleared the journal and the worker says nothing more.
      await repo.heartbeat({ ...cmd(w, s, 1, 1), availableSlots: 1 });
      expect((await repo.findWorker(w))?.recoveryRequired).toBe(0);
      await repo.heartbeat({ ...cmd(w, s, 1, 2), availableSlots: 1, recoveryRequired: 1 });
      const s2 = newSessionId();
      await register(w, s2);
      expect((await repo.findWorker(w))?.recoveryRequired).toBe(0);
      expect((await stats.counts()).recoveryRequired).toEqual(base);
    });

    it('an exact replay of the last applied heartbeat, drain or offline (a lost answer) gets the session as it stands and changes nothing (R-WRK-7)', async () => {
      const w = workerId();
      const s = newSessionId();
      await register(w, s);
      const replayed = async <T>(call: () => Promise<T>, expected: T) => {
        const before = await snapshotDatabase(db);
        await expect(call()).resolves.toEqual(expected);
        expect(await snapshotDatabase(db)).toEqual(before);
      };
      const hb = await repo.heartbeat({ ...cmd(w, s, 1, 0), availableSlots: 1 });
      await replayed(() => repo.heartbeat({ ...cmd(w, s, 1, 0), availableSlots: 1 }), hb);
      // Not the same call: another body, another action.
      await expectFence(repo.heartbeat({ ...cmd(w, s, 1, 0), availableSlots: 0 }), 'version_mismatch');
      await expectFence(repo.drain(cmd(w, s, 1, 0)), 'version_mismatch');
      const drained = await repo.drain(cmd(w, s, 1, 1));
      await replayed(() => repo.drain(cmd(w, s, 1, 1)), drained);
      await expectFence(repo.heartbeat({ ...cmd(w, s, 1, 1), availableSlots: 0 }), 'version_mismatch');
      // Only the last call: one applied before it is stale, even with the same body; and at its own generation.
      await expectFence(repo.heartbeat({ ...cmd(w, s, 1, 0), availableSlots: 1 }), 'version_mismatch');
      const hb2 = await repo.heartbeat({ ...cmd(w, s, 1, 2), availableSlots: 0 });
      await expectFence(repo.heartbeat({ ...cmd(w, s, 1, 1), availableSlots: 0 }), 'version_mismatch');
      await expectFence(repo.heartbeat({ ...cmd(w, s, 2, 2), availableSlots: 0 }), 'generation_mismatch');
      await replayed(() => repo.heartbeat({ ...cmd(w, s, 1, 2), availableSlots: 0 }), hb2);
      const off = await repo.offline(cmd(w, s, 1, 3));
      await replayed(() => repo.offline(cmd(w, s, 1, 3)), off);
      await expectFence(repo.drain(cmd(w, s, 1, 3)), 'session_offline');
      expect((await repo.findWorker(w))?.session).toEqual(off);
    });

    it('a replay is refused once the session is replaced, disabled or expired', async () => {
      const w = workerId();
      const s1 = newSessionId();
      await register(w, s1);
      await repo.heartbeat({ ...cmd(w, s1, 1, 0), availableSlots: 1 });
      await register(w, newSessionId());
      await expectFence(repo.heartbeat({ ...cmd(w, s1, 1, 0), availableSlots: 1 }), 'session_replaced');

      const w2 = workerId();
      const s2 = newSessionId();
      await register(w2, s2);
      await repo.heartbeat({ ...cmd(w2, s2, 1, 0), availableSlots: 1 });
      const audit = { actor: 'test', action: 'worker.disable', target: w2 };
      await repo.setDisabled(w2, true, audit);
      await expectFence(repo.heartbeat({ ...cmd(w2, s2, 1, 0), availableSlots: 1 }), 'worker_disabled');
      await repo.setDisabled(w2, false, { ...audit, action: 'worker.enable' });
      await expectFence(repo.heartbeat({ ...cmd(w2, s2, 1, 0), availableSlots: 1 }), 'session_offline');
      // Disabling moved the version by one: the next heartbeat with the same body is no replay either.
      await expectFence(repo.heartbeat({ ...cmd(w2, s2, 1, 1), availableSlots: 1 }), 'session_offline');

      const w3 = workerId();
      const s3 = newSessionId();
      await register(w3, s3);
      await repo.heartbeat({ ...cmd(w3, s3, 1, 0, 0), availableSlots: 1 }); // leaves a lease that ends now
      await expectFence(repo.heartbeat({ ...cmd(w3, s3, 1, 0, 0), availableSlots: 1 }), 'session_expired');
    });

    // Issue 15 item 12. The key is the action and body only (`heartbeat:<slots>`), and a replacement
    // moves the version by exactly one: the replaced session's last heartbeat then matches a call of the
    // new session one version behind its registration — a call it never sent, and must not be replayed.
    it('a replacement starts with no last call: the new session is never answered with the replaced one’s replay', async () => {
      const w = workerId();
      const s1 = newSessionId();
      const s2 = newSessionId();
      await register(w, s1);
      const old = await repo.heartbeat({ ...cmd(w, s1, 1, 0), availableSlots: 1 }); // last call heartbeat:1
      const { session } = await register(w, s2);
      expect(session).toMatchObject({ generation: 2, version: old.version + 1 });
      const before = await snapshotDatabase(db);
      // At the new generation, one behind: today's replay rule matches the inherited key exactly.
      await expectFence(
        repo.heartbeat({ ...cmd(w, s2, 2, session.version - 1), availableSlots: 1 }),
        'version_mismatch',
      );
      const [batched] = await repo.heartbeatBatch(
        [{ ...cmd(w, s2, 2, session.version - 1), availableSlots: 1 }],
        10,
      );
      expect(batched).toMatchObject({ status: 'rejected', reason: { reason: 'version_mismatch' } });
      expect(await snapshotDatabase(db)).toEqual(before);
      // Its first heartbeat with the same key is applied (the version moves), and only that is replayed.
      const first = await repo.heartbeat({ ...cmd(w, s2, 2, session.version), availableSlots: 1 });
      expect(first.version).toBe(session.version + 1);
      await expect(repo.heartbeat({ ...cmd(w, s2, 2, session.version), availableSlots: 1 })).resolves.toEqual(
        first,
      );
    });

    it('an expired session lease fails closed', async () => {
      const w = workerId();
      const s = newSessionId();
      await register(w, s, 0);
      await expectFence(repo.heartbeat({ ...cmd(w, s, 1, 0), availableSlots: 1 }), 'session_expired');
      await expectFence(register(w, s, 0), 'session_expired');
    });

    it('drain zeroes capacity and keeps heartbeating; offline ends the session for good', async () => {
      const w = workerId();
      const s = newSessionId();
      await register(w, s);
      const drained = await repo.drain(cmd(w, s, 1, 0));
      expect(drained).toMatchObject({ status: 'draining', availableSlots: 0, version: 1 });
      const hb = await repo.heartbeat({ ...cmd(w, s, 1, 1), availableSlots: 4 });
      expect(hb).toMatchObject({ status: 'draining', availableSlots: 0, version: 2 });
      const off = await repo.offline(cmd(w, s, 1, 2));
      expect(off).toMatchObject({ status: 'offline', availableSlots: 0, version: 3 });
      await expectFence(repo.heartbeat({ ...cmd(w, s, 1, 3), availableSlots: 0 }), 'session_offline');
      await expectFence(register(w, s), 'session_offline');
      const again = await register(w, newSessionId());
      expect(again.session).toMatchObject({ generation: 2, version: 4, status: 'online' });
    });

    it('unknown workers and sessions are fenced', async () => {
      await expectFence(
        repo.heartbeat({ ...cmd('nobody', newSessionId(), 1, 0), availableSlots: 0 }),
        'unknown_worker',
      );
    });

    it('disabling fences the live session at once and refuses new sessions; enabling allows a new one', async () => {
      const w = workerId();
      const s = newSessionId();
      await register(w, s);
      const audit = { actor: 'test', action: 'worker.disable', target: w };
      const disabled = await repo.setDisabled(w, true, audit);
      expect(disabled.disabled).toBe(true);
      expect(disabled.session.status).toBe('offline');
      await expectFence(
        repo.heartbeat({ ...cmd(w, s, 1, disabled.session.version), availableSlots: 1 }),
        'worker_disabled',
      );
      await expectFence(register(w, newSessionId()), 'worker_disabled');
      await repo.setDisabled(w, false, { ...audit, action: 'worker.enable' });
      expect((await register(w, newSessionId())).session.generation).toBe(2);
    });

    it('lists workers by keyset pages and filters by status', async () => {
      const prefix = `list-${dialect}`;
      for (const suffix of ['a', 'b', 'c']) await register(`${prefix}-${suffix}`, newSessionId());
      await repo.drain(cmd(`${prefix}-b`, (await repo.findWorker(`${prefix}-b`))!.session.sessionId, 1, 0));
      const page1 = await repo.listWorkers({ afterWorkerId: `${prefix}`, limit: 2 });
      expect(page1.map((w) => w.workerId)).toEqual([`${prefix}-a`, `${prefix}-b`]);
      const page2 = await repo.listWorkers({ afterWorkerId: `${prefix}-b`, limit: 1 });
      expect(page2.map((w) => w.workerId)).toEqual([`${prefix}-c`]);
      const draining = await repo.listWorkers({ status: 'draining', limit: 100 });
      expect(draining.map((w) => w.workerId)).toContain(`${prefix}-b`);
      expect(draining.every((w) => w.session.status === 'draining')).toBe(true);
    });

    it('two connections racing to replace one worker 200 times: generations 1..200, older sessions rejected', async () => {
      const second = await target.openSecond();
      try {
        const repos = [repo, new SqlWorkerSessionRepository(second, ids)];
        const w = workerId();
        const sessions = Array.from({ length: 200 }, () => newSessionId());
        const results = await Promise.all(
          sessions.map((s, i) =>
            repos[i % 2]!.register({ workerId: w, sessionId: s, snapshot: snapshot(), leaseMs: LEASE }),
          ),
        );
        const generations = results.map((r) => r.session.generation).sort((a, b) => a - b);
        expect(generations).toEqual(Array.from({ length: 200 }, (_, i) => i + 1));
        // Within each generation order, versions strictly increase as well.
        const byGeneration = [...results].sort((a, b) => a.session.generation - b.session.generation);
        for (let i = 1; i < byGeneration.length; i++) {
          expect(byGeneration[i]!.session.version).toBeGreaterThan(byGeneration[i - 1]!.session.version);
        }
        const latest = byGeneration[199]!.session;
        expect((await repo.findWorker(w))?.session).toEqual(latest);
        for (const r of byGeneration.slice(0, 199)) {
          await expectFence(
            repos[r.session.generation % 2]!.heartbeat({
              ...cmd(w, r.session.sessionId, r.session.generation, r.session.version),
              availableSlots: 1,
            }),
            'session_replaced',
          );
        }
      } finally {
        await second.close();
      }
    });
  });
}
