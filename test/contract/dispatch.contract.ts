// Size: the one dispatch contract both dialects run; its cases share the database fixtures and the
// after-each slot-counter check. New parts go into their own files (claim-*.contract.ts).
import { randomBytes } from 'node:crypto';
import {
  ClaimResult,
  ConflictError,
  IdGenerator,
  LeaseFenceCommand,
  RunRecord,
  explainPlacement,
  leaseTokenDigest,
  parseTaskSpec,
} from '@ql/domain';
import { createIdGenerator } from '@ql/contracts';
import {
  SqlDatabase,
  SqlLeaseRepository,
  SqlRunRepository,
  SqlTaskRepository,
  SqlWorkerSessionRepository,
} from '@ql/persistence';
import { DispatchTarget } from '../support/dispatch-targets';
import { expectFence, newSessionId, registerBody, snapshot, validCapabilities } from '../support/fixtures';
import { snapshotDatabase } from '../support/db-snapshot';
import { CURRENT_SOFTWARE } from '../support/placement-fixtures';

export type { DispatchTarget };
export { expectFence };

export const SESSION_LEASE = 10 * 60_000;
export const RUN_LEASE = 30_000;
/** How long a run with preferred labels waits for a better-scored worker in these tests. */
export const PREFERENCE_HOLD = 5_000;
export const AUDIT = { actor: 'test', action: 'test', target: 'test' };

export function newToken(): string {
  return randomBytes(32).toString('base64url');
}

/** Everything a dispatch test needs on one database connection. */
export class DispatchFixture {
  readonly sessions: SqlWorkerSessionRepository;
  readonly tasks: SqlTaskRepository;
  readonly runs: SqlRunRepository;
  readonly leases: SqlLeaseRepository;

  constructor(
    readonly db: SqlDatabase,
    readonly ids: IdGenerator = createIdGenerator(),
  ) {
    this.sessions = new SqlWorkerSessionRepository(db, ids);
    this.tasks = new SqlTaskRepository(db, ids);
    this.runs = new SqlRunRepository(db, ids);
    this.leases = new SqlLeaseRepository(db, ids);
  }

  /** Registers a worker session; returns what its pulls carry. */
  async worker(workerId: string, maxConcurrentRuns = 4, capabilities: Record<string, unknown> = {}) {
    const sessionId = newSessionId();
    const result = await this.sessions.register({
      workerId,
      sessionId,
      snapshot: snapshot({
        ...registerBody({ maxConcurrentRuns, availableSlots: maxConcurrentRuns }),
        capabilities: validCapabilities(capabilities),
      }),
      leaseMs: SESSION_LEASE,
    });
    return {
      workerId,
      sessionId,
      fence: { generation: result.session.generation, expectedVersion: result.session.version },
    };
  }

  async task(overrides: Record<string, unknown> = {}) {
    const spec = parseTaskSpec({
      name: `task-${this.ids.uuidV7()}`,
      command: 'echo hello',
      runtime: 'shell',
      ...overrides,
    });
    return this.tasks.create(this.ids.uuidV7(), spec, AUDIT);
  }

  async queue(taskId: string, count: number, priority?: number): Promise<RunRecord[]> {
    const runs: RunRecord[] = [];
    for (let i = 0; i < count; i++) {
      const result = await this.runs.trigger({
        runId: this.ids.uuidV7(),
        taskId,
        trigger: 'manual',
        priority,
      });
      runs.push(result!.run);
    }
    return runs;
  }

  pull(
    worker: Awaited<ReturnType<DispatchFixture['worker']>>,
    offerId = this.ids.uuidV7(),
    token = newToken(),
    preferenceHoldMs = PREFERENCE_HOLD,
  ) {
    return this.leases.claim({
      workerId: worker.workerId,
      sessionId: worker.sessionId,
      fence: worker.fence,
      offerId,
      tokenDigest: leaseTokenDigest(token),
      software: CURRENT_SOFTWARE,
      leaseMs: RUN_LEASE,
      preferenceHoldMs,
    });
  }

  leaseCommand(
    worker: Awaited<ReturnType<DispatchFixture['worker']>>,
    offer: { lease: { offerId: string; leaseGeneration: number; version: number } },
    token: string,
  ) {
    return {
      workerId: worker.workerId,
      sessionId: worker.sessionId,
      fence: worker.fence,
      offerId: offer.lease.offerId,
      tokenDigest: leaseTokenDigest(token),
      software: CURRENT_SOFTWARE,
      leaseGeneration: offer.lease.leaseGeneration,
      leaseVersion: offer.lease.version,
      leaseMs: RUN_LEASE,
    };
  }

  /**
   * A new session of the fence's worker (the old one is replaced) and the same lease fence under it:
   * what a restarted worker sends for its predecessor's attempt (ADR 0015).
   */
  async successor(fence: LeaseFenceCommand): Promise<LeaseFenceCommand> {
    const { session } = await this.sessions.register({
      workerId: fence.workerId,
      sessionId: newSessionId(),
      snapshot: snapshot(),
      leaseMs: SESSION_LEASE,
    });
    return {
      ...fence,
      sessionId: session.sessionId,
      fence: { generation: session.generation, expectedVersion: session.version },
    };
  }

  /** A queued run of a fresh task claimed by a fresh worker: its run, worker, token, offer and lease fence. */
  async claimedRun(workerId: string, task: Record<string, unknown> = {}) {
    const [run] = await this.queue((await this.task(task)).id, 1);
    const worker = await this.worker(workerId);
    const token = newToken();
    const offer = offered(await this.pull(worker, this.ids.uuidV7(), token));
    const { leaseMs: _leaseMs, ...fence } = this.leaseCommand(worker, offer, token);
    return { run: run!, worker, token, offer, fence: fence satisfies LeaseFenceCommand };
  }

  async count(table: string, where = '1 = 1'): Promise<number> {
    const row = await this.db.one<{ n: number | string }>(
      `SELECT count(*) AS n FROM ${table} WHERE ${where}`,
    );
    return Number(row!.n);
  }

  /** Each worker's slot counter equals its current session's active leases (what claims check). */
  async expectSlotCountersMatch(): Promise<void> {
    const rows = await this.db.many<{ worker_id: string; counted: number | string; live: number | string }>(
      `SELECT w.worker_id, w.active_leases AS counted,
         (SELECT count(*) FROM run_leases l WHERE l.worker_id = w.worker_id AND l.session_id = w.session_id
            AND l.state = 'active') AS live
       FROM workers w`,
    );
    for (const r of rows)
      expect({ worker: r.worker_id, counted: Number(r.counted) }).toEqual({
        worker: r.worker_id,
        counted: Number(r.live),
      });
  }

  /** Stands in for the next issue's `starting` acknowledgement: the attempt has started. */
  async markStarted(attemptId: string): Promise<void> {
    await this.db.run(`UPDATE attempts SET status = 'starting', version = version + 1 WHERE id = :id`, {
      id: attemptId,
    });
  }
}

export function offered(result: ClaimResult) {
  if (result.kind !== 'offered') throw new Error(`expected an offer, got idle: ${result.reason}`);
  return result.offer;
}

/** A part of the contract kept in a file of its own; it reads `target` and `f` inside its tests. */
export interface DispatchSuite {
  readonly target: DispatchTarget;
  readonly f: DispatchFixture;
  workerId(name?: string): string;
}

/** R-RUN-1..4, R-PLC, R-LSE-1..6: one contract, run on SQLite and on PostgreSQL. */
export function describeDispatchContract(
  dialect: string,
  makeTarget: () => DispatchTarget,
  ...parts: ((suite: DispatchSuite) => void)[]
): void {
  describe(`runs, placement and leases contract (${dialect})`, () => {
    let target: DispatchTarget;
    let f: DispatchFixture;
    let n = 0;
    const workerId = (name = 'w') => `${name}-${dialect}-${++n}`;

    beforeAll(async () => {
      target = makeTarget();
      f = new DispatchFixture(await target.open());
    });
    afterAll(async () => {
      await target.dispose();
    });
    // Each test gets an empty queue: earlier tests' runs must not be offered to later ones.
    beforeEach(async () => {
      for (const table of ['run_events', 'run_leases', 'attempts', 'runs'])
        await f.db.run(`DELETE FROM ${table}`);
      await f.db.run('UPDATE workers SET active_leases = 0');
    });
    afterEach(async () => {
      await f.expectSlotCountersMatch();
    });

    it('tasks: every edit that changes the content makes a revision with a digest; runs pin theirs', async () => {
      const task = await f.task({ command: 'echo one' });
      expect(task.revision).toBe(1);
      const [first] = await f.queue(task.id, 1);
      const same = await f.tasks.update(task.id, parseTaskSpec({ ...task.spec }), AUDIT);
      expect(same.changed).toBe(false);
      const edited = await f.tasks.update(
        task.id,
        parseTaskSpec({ ...task.spec, command: 'echo two' }),
        AUDIT,
      );
      expect(edited).toMatchObject({ changed: true, task: { revision: 2 } });
      expect(edited.task.digest).not.toBe(task.digest);
      const revisions = await f.tasks.listRevisions(task.id, { limit: 10 });
      expect(revisions.map((r) => [r.revision, r.spec.command])).toEqual([
        [2, 'echo two'],
        [1, 'echo one'],
      ]);
      expect(first!).toMatchObject({ revision: 1, specDigest: task.digest });
      const worker = await f.worker(workerId());
      const offer = offered(await f.pull(worker));
      expect(offer.revision).toMatchObject({ revision: 1, digest: task.digest });
      expect(offer.revision.spec.command).toBe('echo one');
    });

    it('a live task name is unique; a deleted task frees it and cannot be triggered', async () => {
      const task = await f.task({ name: `unique-${dialect}` });
      await expect(f.task({ name: `unique-${dialect}` })).rejects.toBeInstanceOf(ConflictError);
      await f.tasks.delete(task.id, AUDIT);
      expect(await f.tasks.find(task.id)).toBeNull();
      await expect(f.queue(task.id, 1)).rejects.toThrow('task not found');
      expect((await f.task({ name: `unique-${dialect}` })).name).toBe(`unique-${dialect}`);
    });

    it('manual trigger is idempotent per key; the same key with another request is a conflict', async () => {
      const task = await f.task();
      const trigger = (digest: string) =>
        f.runs.trigger({
          runId: f.ids.uuidV7(),
          taskId: task.id,
          trigger: 'manual',
          idempotency: { key: `key-${task.id}`, digest },
        });
      const first = await trigger('d1');
      const again = await trigger('d1');
      expect(first).toMatchObject({ created: true });
      expect(again).toEqual({ created: false, run: first!.run });
      await expect(trigger('d2')).rejects.toBeInstanceOf(ConflictError);
      expect(await f.count('runs', `task_id = '${task.id}'`)).toBe(1);
    });

    it('cron: one run per (task, scheduled time), whoever triggers it and whatever the revision', async () => {
      const task = await f.task({ cron: '*/5 * * * *' });
      const at = Date.UTC(2026, 11, 1, 12, 5);
      const cron = () =>
        f.runs.trigger({
          runId: f.ids.uuidV7(),
          taskId: task.id,
          trigger: 'cron',
          scheduledAt: at,
          revision: task.revision,
        });
      const results = await Promise.all([cron(), cron(), cron()]);
      expect(results.filter((r) => r?.created)).toHaveLength(1);
      expect(results.filter((r) => r === null)).toHaveLength(2);
      const run = results.find((r) => r)!.run;
      expect(run).toMatchObject({ trigger: 'cron', scheduledAt: at, status: 'queued' });
      // A stale revision never fires.
      expect(
        await f.runs.trigger({
          runId: f.ids.uuidV7(),
          taskId: task.id,
          trigger: 'cron',
          scheduledAt: at + 1,
          revision: 9,
        }),
      ).toBeNull();
      // After an edit the same time does not fire again under the new revision.
      const edited = await f.tasks.update(task.id, parseTaskSpec({ ...task.spec, command: 'echo 2' }), AUDIT);
      expect(
        await f.runs.trigger({
          runId: f.ids.uuidV7(),
          taskId: task.id,
          trigger: 'cron',
          scheduledAt: at,
          revision: edited.task.revision,
        }),
      ).toBeNull();
      expect(await f.count('runs', `task_id = '${task.id}'`)).toBe(1);
    });

    it('pull claims the highest priority, then the oldest run; events carry a per-run sequence', async () => {
      const task = await f.task();
      const [low1, low2] = await f.queue(task.id, 2, 1);
      const [high] = await f.queue(task.id, 1, 5);
      const worker = await f.worker(workerId(), 4);
      const order = [];
      for (let i = 0; i < 3; i++) order.push(offered(await f.pull(worker)).run.id);
      expect(order).toEqual([high!.id, low1!.id, low2!.id]);
      const claimed = await f.runs.find(high!.id);
      expect(claimed).toMatchObject({ status: 'dispatching', attemptCount: 1, version: 1 });
      const events = await f.runs.events(high!.id, { afterSeq: 0, limit: 10 });
      expect(events.map((e) => [e.seq, e.type])).toEqual([
        [1, 'run.created'],
        [2, 'run.dispatching'],
        [3, 'attempt.claimed'],
      ]);
      const [attempt] = await f.runs.attempts(high!.id);
      expect(attempt).toMatchObject({
        attemptNo: 1,
        status: 'claimed',
        workerId: worker.workerId,
        leaseGeneration: 1,
      });
    });

    it('the lease stores only the token digest and binds worker, session and generation', async () => {
      const task = await f.task();
      await f.queue(task.id, 1);
      const worker = await f.worker(workerId());
      const token = newToken();
      const offer = offered(await f.pull(worker, f.ids.uuidV7(), token));
      expect(offer.lease).toMatchObject({
        workerId: worker.workerId,
        sessionId: worker.sessionId,
        sessionGeneration: 1,
        leaseGeneration: 1,
        version: 0,
        state: 'active',
      });
      expect(JSON.stringify(offer)).not.toContain(token);
      expect(JSON.stringify(offer)).not.toContain(leaseTokenDigest(token));
      const stored = await f.db.one<Record<string, unknown>>(`SELECT * FROM run_leases`);
      expect(Object.values(stored!).map(String)).not.toContain(token);
      expect(stored!.token_digest).toBe(leaseTokenDigest(token));
    });

    it('replay: the same offer id and token rebuild the same offer and write nothing; another token is fenced', async () => {
      const task = await f.task();
      await f.queue(task.id, 2);
      const worker = await f.worker(workerId());
      const offerId = f.ids.uuidV7();
      const token = newToken();
      const first = offered(await f.pull(worker, offerId, token));
      const [events, leases] = [await f.count('run_events'), await f.count('run_leases')];
      const replay = await f.pull(worker, offerId, token);
      expect(replay).toEqual({ kind: 'offered', replayed: true, offer: first });
      await expectFence(f.pull(worker, offerId, newToken()), 'lease', 'offer_conflict');
      const other = await f.worker(workerId());
      await expectFence(f.pull(other, offerId, token), 'lease', 'offer_conflict');
      expect([await f.count('run_events'), await f.count('run_leases')]).toEqual([events, leases]);
      expect(await f.count('runs', `status = 'queued'`)).toBe(1);
    });

    it('replay works when nothing else is queued, and at full capacity', async () => {
      const task = await f.task();
      await f.queue(task.id, 1);
      const worker = await f.worker(workerId(), 1);
      const offerId = f.ids.uuidV7();
      const token = newToken();
      const first = offered(await f.pull(worker, offerId, token));
      expect(await f.pull(worker, offerId, token)).toEqual({ kind: 'offered', replayed: true, offer: first });
      await f.queue(task.id, 1);
      expect(await f.pull(worker, offerId, token)).toEqual({ kind: 'offered', replayed: true, offer: first });
      await expectFence(f.pull(worker, offerId, newToken()), 'lease', 'offer_conflict');
      expect(await f.pull(worker)).toMatchObject({ kind: 'idle', reason: 'no_capacity' });
    });

    it('capacity: never more active leases than min(max, available slots); draining pulls nothing', async () => {
      const task = await f.task();
      await f.queue(task.id, 5);
      const worker = await f.worker(workerId(), 2);
      offered(await f.pull(worker));
      offered(await f.pull(worker));
      expect(await f.pull(worker)).toMatchObject({
        kind: 'idle',
        reason: 'no_capacity',
        activeLeases: 2,
        capacity: 2,
      });
      const one = await f.worker(workerId(), 3);
      const hb = await f.sessions.heartbeat({
        workerId: one.workerId,
        sessionId: one.sessionId,
        fence: one.fence,
        leaseMs: SESSION_LEASE,
        availableSlots: 1,
      });
      const slotted = { ...one, fence: { generation: hb.generation, expectedVersion: hb.version } };
      offered(await f.pull(slotted));
      expect(await f.pull(slotted)).toMatchObject({ kind: 'idle', reason: 'no_capacity', capacity: 1 });
      const drainer = await f.worker(workerId(), 2);
      const drained = await f.sessions.drain({
        workerId: drainer.workerId,
        sessionId: drainer.sessionId,
        fence: drainer.fence,
        leaseMs: SESSION_LEASE,
      });
      expect(
        await f.pull({
          ...drainer,
          fence: { generation: drained.generation, expectedVersion: drained.version },
        }),
      ).toMatchObject({ kind: 'idle', reason: 'draining' });
      expect(await f.count('runs', `status = 'queued'`)).toBe(2);
    });

    it('a replaced, stale or unknown session is fenced and nothing is claimed', async () => {
      const task = await f.task();
      await f.queue(task.id, 2);
      const worker = await f.worker(workerId());
      await expectFence(
        f.pull({ ...worker, fence: { ...worker.fence, expectedVersion: 7 } }),
        'session',
        'version_mismatch',
      );
      const replacement = await f.sessions.register({
        workerId: worker.workerId,
        sessionId: newSessionId(),
        snapshot: snapshot(),
        leaseMs: SESSION_LEASE,
      });
      expect(replacement.outcome).toBe('replaced');
      await expectFence(f.pull(worker), 'session', 'session_replaced');
      await expectFence(f.pull({ ...worker, workerId: workerId('ghost') }), 'session', 'unknown_worker');
      expect(await f.count('run_leases')).toBe(0);
      expect(await f.count('runs', `status = 'queued'`)).toBe(2);
    });

    it('placement: a run no worker matches stays queued and the explanation counts the reasons', async () => {
      const arm = await f.task({ placement: { required: { architectures: ['arm64'] } } });
      const gpu = await f.task({ placement: { required: { gpu: { vendor: 'nvidia', features: [] } } } });
      const py = await f.task({
        runtime: 'python',
        placement: { required: { runtimes: [{ name: 'python', range: '>=3.12' }] } },
      });
      const [armRun] = await f.queue(arm.id, 1);
      await f.queue(gpu.id, 1);
      await f.queue(py.id, 1);
      const worker = await f.worker(workerId(), 4);
      expect(await f.pull(worker)).toMatchObject({ kind: 'idle', reason: 'no_matching_run', scanned: 3 });
      expect(await f.count('runs', `status = 'queued'`)).toBe(3);
      const { now, candidates } = await f.runs.placementCandidates(100);
      const explained = explainPlacement(armRun!.placement, candidates, now);
      expect(explained.matching).toBe(0);
      expect(explained.reasons.architecture).toBeGreaterThanOrEqual(1);
      const armWorker = await f.worker(workerId('arm'), 1, { architecture: 'arm64' });
      expect(offered(await f.pull(armWorker)).run.id).toBe(armRun!.id);
    });

    it('placement: the task runtime is required implicitly (node runs only on workers with node)', async () => {
      const task = await f.task({ runtime: 'node' });
      await f.queue(task.id, 1);
      const noNode = await f.worker(workerId(), 1, { runtimes: [{ name: 'python', version: '3.11.7' }] });
      expect(await f.pull(noNode)).toMatchObject({ kind: 'idle', reason: 'no_matching_run' });
      const withNode = await f.worker(workerId(), 1);
      expect((await f.pull(withNode)).kind).toBe('offered');
    });

    it('renew: bumps the version and extends the term; stale version, token or generation are fenced', async () => {
      const task = await f.task();
      await f.queue(task.id, 1);
      const worker = await f.worker(workerId());
      const token = newToken();
      const offer = offered(await f.pull(worker, f.ids.uuidV7(), token));
      target.clock.advance(1_000);
      const renewed = await f.leases.renew(f.leaseCommand(worker, offer, token));
      expect(renewed.lease.version).toBe(1);
      expect(renewed.lease.expiresAt).toBeGreaterThan(offer.lease.expiresAt);
      expect(renewed.cancelRequested).toBe(false);
      // The same renewal again (its answer was lost): the lease as it stands, nothing written.
      target.clock.advance(1_000);
      const before = await snapshotDatabase(f.db);
      expect(await f.leases.renew(f.leaseCommand(worker, offer, token))).toEqual(renewed);
      expect(await snapshotDatabase(f.db)).toEqual(before);
      // Two renewals behind, or ahead of the lease, is refused.
      const again = await f.leases.renew(f.leaseCommand(worker, renewed, token));
      expect(again.lease.version).toBe(2);
      for (const version of [0, 3]) {
        await expectFence(
          f.leases.renew(f.leaseCommand(worker, { lease: { ...again.lease, version } }, token)),
          'lease',
          'lease_version_mismatch',
        );
      }
      await expectFence(
        f.leases.renew(f.leaseCommand(worker, renewed, newToken())),
        'lease',
        'lease_token_mismatch',
      );
      await expectFence(
        f.leases.renew(f.leaseCommand(worker, { lease: { ...renewed.lease, leaseGeneration: 2 } }, token)),
        'lease',
        'lease_generation_mismatch',
      );
      target.clock.advance(RUN_LEASE + 1);
      await expectFence(f.leases.renew(f.leaseCommand(worker, again, token)), 'lease', 'lease_expired');
    });

    it('release before start requeues the attempt; the next claim is a new lease generation and the old token is fenced', async () => {
      const task = await f.task();
      const [run] = await f.queue(task.id, 1);
      const a = await f.worker(workerId());
      const b = await f.worker(workerId());
      const tokenA = newToken();
      const offerA = offered(await f.pull(a, f.ids.uuidV7(), tokenA));
      const released = await f.leases.release(f.leaseCommand(a, offerA, tokenA));
      expect(released.state).toBe('released');
      expect(await f.runs.find(run!.id)).toMatchObject({ status: 'queued' });
      const offerB = offered(await f.pull(b));
      expect(offerB.attempt.id).toBe(offerA.attempt.id);
      expect(offerB.attempt.attemptNo).toBe(1);
      expect(offerB.lease.leaseGeneration).toBe(2);
      await expectFence(f.leases.renew(f.leaseCommand(a, offerA, tokenA)), 'lease', 'lease_not_active');
      await expectFence(f.leases.release(f.leaseCommand(a, offerA, tokenA)), 'lease', 'lease_not_active');
    });

    it('release after start is refused and changes nothing', async () => {
      const task = await f.task();
      await f.queue(task.id, 1);
      const worker = await f.worker(workerId());
      const token = newToken();
      const offer = offered(await f.pull(worker, f.ids.uuidV7(), token));
      await f.markStarted(offer.attempt.id);
      const events = await f.count('run_events');
      await expectFence(f.leases.release(f.leaseCommand(worker, offer, token)), 'lease', 'attempt_started');
      expect(await f.count('run_events')).toBe(events);
      expect(await f.count('run_leases', `state = 'active'`)).toBe(1);
    });

    it('sweeper: an expired unstarted lease makes the attempt claimable again; its token is fenced', async () => {
      const task = await f.task();
      const [run] = await f.queue(task.id, 1);
      const a = await f.worker(workerId());
      const tokenA = newToken();
      const offerA = offered(await f.pull(a, f.ids.uuidV7(), tokenA));
      expect((await f.leases.sweep(64)).requeued).toBe(0);
      target.clock.advance(RUN_LEASE + 1);
      expect(await f.leases.sweep(64)).toMatchObject({ requeued: 1 });
      expect(await f.leases.sweep(64)).toMatchObject({ requeued: 0 });
      expect(await f.runs.find(run!.id)).toMatchObject({ status: 'queued', attemptCount: 1 });
      const again = offered(await f.pull(a));
      expect(again.attempt.id).toBe(offerA.attempt.id);
      expect(again.lease.leaseGeneration).toBe(2);
      await expectFence(f.leases.renew(f.leaseCommand(a, offerA, tokenA)), 'lease', 'lease_not_active');
      const types = (await f.runs.events(run!.id, { afterSeq: 0, limit: 20 })).map((e) => e.type);
      expect(types).toEqual([
        'run.created',
        'run.dispatching',
        'attempt.claimed',
        'attempt.lease_expired',
        'run.requeued',
        'run.dispatching',
        'attempt.claimed',
      ]);
    });

    it('sweeper: a started attempt whose lease expired is lost; with a retry policy the run waits, then gets attempt 2', async () => {
      const task = await f.task({ retry: { maxAttempts: 2, initialBackoffMs: 5_000 } });
      const [run] = await f.queue(task.id, 1);
      const worker = await f.worker(workerId());
      const first = offered(await f.pull(worker));
      await f.markStarted(first.attempt.id);
      target.clock.advance(RUN_LEASE + 1);
      expect(await f.leases.sweep(64)).toMatchObject({ lost: 1 });
      expect(await f.runs.find(run!.id)).toMatchObject({ status: 'retry_wait' });
      expect((await f.runs.attempts(run!.id))[0]).toMatchObject({ status: 'lost' });
      expect(await f.pull(worker)).toMatchObject({ kind: 'idle' });
      expect(await f.leases.sweep(64)).toMatchObject({ retried: 0 });
      target.clock.advance(5_000);
      expect(await f.leases.sweep(64)).toMatchObject({ retried: 1 });
      const second = offered(await f.pull(worker));
      expect(second.attempt).toMatchObject({ attemptNo: 2, leaseGeneration: 1 });
      expect(second.attempt.id).not.toBe(first.attempt.id);
      await f.markStarted(second.attempt.id);
      target.clock.advance(RUN_LEASE + 1);
      expect(await f.leases.sweep(64)).toMatchObject({ failed: 1 });
      expect(await f.runs.find(run!.id)).toMatchObject({ status: 'lost', attemptCount: 2 });
    });

    it('sweeper: without a retry policy a lost attempt fails the run', async () => {
      const task = await f.task();
      const [run] = await f.queue(task.id, 1);
      const worker = await f.worker(workerId());
      const offer = offered(await f.pull(worker));
      await f.markStarted(offer.attempt.id);
      target.clock.advance(RUN_LEASE + 1);
      expect(await f.leases.sweep(64)).toMatchObject({ failed: 1 });
      expect(await f.runs.find(run!.id)).toMatchObject({ status: 'failed' });
      expect((await f.runs.find(run!.id))!.finishedAt).not.toBeNull();
    });

    it('sweeper: two replicas sweeping the same expired leases apply each expiry exactly once', async () => {
      const task = await f.task();
      const runs = await f.queue(task.id, 40);
      const worker = await f.worker(workerId(), 40);
      for (let i = 0; i < 40; i++) offered(await f.pull(worker));
      target.clock.advance(RUN_LEASE + 1);
      const second = new DispatchFixture(await target.openSecond(), f.ids);
      try {
        const results = await Promise.all([
          f.leases.sweep(64),
          second.leases.sweep(64),
          f.leases.sweep(64),
          second.leases.sweep(64),
        ]);
        expect(results.reduce((sum, r) => sum + r.requeued, 0)).toBe(40);
        expect(await f.count('runs', `status = 'queued'`)).toBe(40);
        expect(await f.count('run_events', `type = 'attempt.lease_expired'`)).toBe(40);
        for (const run of runs) {
          const seqs = (await f.runs.events(run.id, { afterSeq: 0, limit: 20 })).map((e) => e.seq);
          expect(seqs).toEqual([1, 2, 3, 4, 5]);
        }
      } finally {
        await second.db.close();
      }
    });

    it('sweeper: fixed work per cycle', async () => {
      const task = await f.task();
      await f.queue(task.id, 5);
      const worker = await f.worker(workerId(), 5);
      for (let i = 0; i < 5; i++) offered(await f.pull(worker));
      target.clock.advance(RUN_LEASE + 1);
      expect((await f.leases.sweep(2)).requeued).toBe(2);
      expect((await f.leases.sweep(2)).requeued).toBe(2);
      expect((await f.leases.sweep(2)).requeued).toBe(1);
    });

    it('cancel: a queued run ends at once; a dispatched one keeps cancel_requested, renew reports it, expiry cancels', async () => {
      const task = await f.task({ retry: { maxAttempts: 3, initialBackoffMs: 1_000 } });
      const [queued, held] = await f.queue(task.id, 2);
      const worker = await f.worker(workerId());
      const token = newToken();
      const offer = offered(await f.pull(worker, f.ids.uuidV7(), token));
      expect(offer.run.id).toBe(queued!.id);
      const cancelledNow = await f.runs.requestCancel(held!.id, AUDIT);
      expect(cancelledNow).toMatchObject({ status: 'cancelled', cancelRequested: true });
      const flagged = await f.runs.requestCancel(queued!.id, AUDIT);
      expect(flagged).toMatchObject({ status: 'dispatching', cancelRequested: true });
      const renewed = await f.leases.renew(f.leaseCommand(worker, offer, token));
      expect(renewed.cancelRequested).toBe(true);
      await f.markStarted(offer.attempt.id);
      target.clock.advance(RUN_LEASE + 1);
      expect(await f.leases.sweep(64)).toMatchObject({ cancelled: 1 });
      expect(await f.runs.find(queued!.id)).toMatchObject({ status: 'cancelled' });
      expect((await f.runs.attempts(queued!.id))[0]).toMatchObject({ status: 'cancelled' });
      await expect(f.runs.requestCancel(queued!.id, AUDIT)).rejects.toBeInstanceOf(ConflictError);
    });

    it('race: 8 pullers on 8 sessions over 500 queued runs claim every attempt exactly once, within capacity', async () => {
      const task = await f.task();
      const total = 500;
      const capacity = 64;
      const ids = new Set((await f.queue(task.id, total)).map((r) => r.id));
      // Two independent connections (pools), pullers spread over them.
      const second = new DispatchFixture(await target.openSecond(), f.ids);
      const fixtures = [f, second];
      const workers = [];
      for (let i = 0; i < 8; i++) workers.push(await f.worker(workerId('racer'), capacity));
      const claimedBy = new Map<string, string>();
      const perWorker = new Map<string, number>();
      await Promise.all(
        workers.map(async (worker, i) => {
          const fx = fixtures[i % 2]!;
          for (;;) {
            const result = await fx.pull(worker);
            if (result.kind === 'idle') {
              expect(['no_queued_runs', 'no_capacity']).toContain(result.reason);
              return;
            }
            expect(claimedBy.has(result.offer.run.id)).toBe(false);
            claimedBy.set(result.offer.run.id, worker.workerId);
            const held = (perWorker.get(worker.workerId) ?? 0) + 1;
            perWorker.set(worker.workerId, held);
            expect(held).toBeLessThanOrEqual(capacity);
          }
        }),
      );
      expect(new Set(claimedBy.keys())).toEqual(ids);
      expect(await f.count('run_leases', `state = 'active'`)).toBe(total);
      expect(await f.count('attempts')).toBe(total);
      expect(await f.count('runs', `status = 'dispatching'`)).toBe(total);
      const stored = await f.db.many<{ worker_id: string; n: number | string }>(
        `SELECT worker_id, count(*) AS n FROM run_leases WHERE state = 'active' GROUP BY worker_id`,
      );
      for (const row of stored) expect(Number(row.n)).toBeLessThanOrEqual(capacity);
      // A pull from a replaced session: 409-class fence, nothing claimed.
      const [victim] = workers;
      const extra = await f.task();
      await f.queue(extra.id, 1);
      await f.sessions.register({
        workerId: victim!.workerId,
        sessionId: newSessionId(),
        snapshot: snapshot(),
        leaseMs: SESSION_LEASE,
      });
      const leases = await f.count('run_leases');
      await expectFence(second.pull(victim!), 'session', 'session_replaced');
      expect(await f.count('run_leases')).toBe(leases);
      await second.db.close();
    });

    const suite: DispatchSuite = {
      get target() {
        return target;
      },
      get f() {
        return f;
      },
      workerId,
    };
    for (const part of parts) part(suite);
  });
}
