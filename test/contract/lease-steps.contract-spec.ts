// Size: one set of scenarios and refusals, run on both dialects and compared row for row (ADRs 0017, 0047);
// split, what one comparison proves would need two.
// ADR 0017: renew, starting, running, start failure and completion cost one statement on PostgreSQL
// when applied (`ql_lease_step`), and what that function writes is what the explaining path (the
// transaction SQLite still runs) writes: the same scenarios on both dialects leave the same rows.
import { FencedError, LeaseFenceCommand, leaseTokenDigest } from '@ql/domain';
import { PostgresDatabase, SqlActivationRepository, SqlDatabase } from '@ql/persistence';
import { createPostgresDatabase } from '../support/databases';
import { snapshotDatabase } from '../support/db-snapshot';
import { DispatchTarget, postgresDispatchTarget, sqliteDispatchTarget } from '../support/dispatch-targets';
import { newSessionId, snapshot } from '../support/fixtures';
import { DispatchFixture, RUN_LEASE, SESSION_LEASE, newToken, offered } from './dispatch.contract';

type Worker = Awaited<ReturnType<DispatchFixture['worker']>>;

/** Statements `call` sent to `db` (BEGIN and COMMIT count), the rows they handed back (SQLite), its result. */
async function counted<T>(db: SqlDatabase, call: () => Promise<T>): Promise<[number, number, T]> {
  const [before, rowsBefore] = [db.statements.value, db.statements.rows];
  const result = await call();
  return [db.statements.value - before, db.statements.rows - rowsBefore, result];
}

/**
 * ADR 0025: an applied step on SQLite, in statements (BEGIN and COMMIT counted) and rows handed back.
 * One read of the worker, lease, run and attempt; its writes read nothing back (before: four reads,
 * and the attempt's, run's and lease's rows returned by their writes: 9 / 9 / 11 statements, 6 or 7 rows).
 */
const SQLITE_STEP_COST = {
  renew: { statements: 1, rows: 1 },
  starting: { statements: 6, rows: 1 },
  running: { statements: 6, rows: 1 },
  start_failure: { statements: 8, rows: 1 },
  completion: { statements: 8, rows: 1 },
  // ADR 0047: `running` and the completion in one transaction (the running step's three writes more).
  fast_completion: { statements: 11, rows: 1 },
};

/** A dialect's fixture, activation repository and the statements each step cost. */
class Steps {
  readonly acts: SqlActivationRepository;
  readonly costs: Record<string, number[]> = {};
  readonly rowsBack: Record<string, number[]> = {};
  private n = 0;

  constructor(
    readonly f: DispatchFixture,
    readonly target?: DispatchTarget,
  ) {
    this.acts = new SqlActivationRepository(f.db);
  }

  private async step<T>(name: string, call: () => Promise<T>): Promise<T> {
    const [cost, rows, result] = await counted(this.f.db, call);
    (this.costs[name] ??= []).push(cost);
    (this.rowsBack[name] ??= []).push(rows);
    return result;
  }

  async claimed(task: Record<string, unknown>, worker?: Worker) {
    const t = await this.f.task({ timeoutMs: 60_000, ...task });
    const [run] = await this.f.queue(t.id, 1);
    const w = worker ?? (await this.f.worker(`w-${++this.n}`));
    return { run: run!, worker: w, ...(await this.pulled(w)) };
  }

  async pulled(w: Worker) {
    const token = newToken();
    const offer = offered(await this.f.pull(w, this.f.ids.uuidV7(), token));
    const fence: LeaseFenceCommand = (({ leaseMs: _leaseMs, ...rest }) => rest)(
      this.f.leaseCommand(w, offer, token),
    );
    return { token, offer, fence };
  }

  renew(fence: LeaseFenceCommand) {
    return this.step('renew', () => this.f.leases.renew({ ...fence, leaseMs: RUN_LEASE }));
  }
  starting(fence: LeaseFenceCommand) {
    return this.step('starting', () => this.acts.starting(fence));
  }
  running(fence: LeaseFenceCommand, executorHandle = 'pid:42') {
    return this.step('running', () => this.acts.running({ ...fence, executorHandle }));
  }
  startFailure(fence: LeaseFenceCommand, errorCode = 'spawn_failed') {
    return this.step('start_failure', () => this.acts.startFailure({ ...fence, errorCode }));
  }
  complete(fence: LeaseFenceCommand, outcome: 'succeeded' | 'failed' | 'timed_out', exitCode: number | null) {
    const errorSummary = outcome === 'succeeded' ? null : `exit "${exitCode}"`;
    return this.step('completion', () => this.acts.complete({ ...fence, outcome, exitCode, errorSummary }));
  }
  /** ADR 0047: the completion that stands in for `running` (the worker sent none). */
  fastComplete(fence: LeaseFenceCommand, outcome: 'succeeded' | 'failed', exitCode: number, handle = 'pid:7') {
    const errorSummary = outcome === 'succeeded' ? null : `exit "${exitCode}"`;
    return this.step('fast_completion', () =>
      this.acts.complete({ ...fence, outcome, exitCode, errorSummary, executorHandle: handle }),
    );
  }

  /** Every row the steps wrote, ids replaced by their order of appearance, so two databases compare. */
  async rows(): Promise<unknown> {
    const { db } = this.f;
    const tables = {
      runs: `SELECT id, status, version, event_seq, attempt_count, current_attempt_id, cancel_requested,
        next_attempt_at, updated_at, finished_at FROM runs ORDER BY created_at, id`,
      attempts: `SELECT a.id, a.run_id, a.attempt_no, a.status, a.version, a.session_id, a.exit_code,
        a.lease_generation, a.updated_at, a.finished_at, a.deadline_at, a.started_at, a.executor_handle,
        a.error_code, a.error_summary, a.callback_seq, a.ack_starting, a.ack_running, a.ack_final
        FROM attempts a JOIN runs r ON r.id = a.run_id ORDER BY r.created_at, a.attempt_no`,
      run_leases: `SELECT l.offer_id, l.attempt_id, l.lease_generation, l.version, l.state, l.expires_at,
        l.ended_at FROM run_leases l JOIN runs r ON r.id = l.run_id ORDER BY r.created_at, l.claimed_at`,
      run_events: `SELECT e.run_id, e.seq, e.type, e.attempt_id, e.at, e.detail FROM run_events e
        JOIN runs r ON r.id = e.run_id ORDER BY r.created_at, e.seq`,
      workers: `SELECT worker_id, active_leases FROM workers ORDER BY worker_id`,
    };
    const ids = new Map<string, string>();
    const norm = (value: unknown): unknown => {
      if (value instanceof Date) return value.getTime();
      if (typeof value === 'boolean') return value ? 1 : 0;
      if (typeof value === 'string' && /^[0-9a-f-]{36}$/.test(value)) {
        if (!ids.has(value)) ids.set(value, `id${ids.size}`);
        return ids.get(value);
      }
      return typeof value === 'string' && /^\d+$/.test(value) ? Number(value) : value;
    };
    const out: Record<string, unknown> = {};
    for (const [table, sql] of Object.entries(tables)) {
      const rows = await db.many<Record<string, unknown>>(sql);
      out[table] = rows.map((row) => Object.fromEntries(Object.entries(row).map(([k, v]) => [k, norm(v)])));
    }
    return out;
  }
}

/** Each step once or more, on the paths a run takes: success, retries, start failures, cancel, restart. */
async function scenarios(s: Steps, clock: { advance(ms: number): void }) {
  const answers: unknown[] = [];
  const keep = (a: { status: string; snapshot: object; cancelRequested: boolean }) => {
    const { runId: _r, attemptId: _a, ...snap } = a.snapshot as Record<string, unknown>;
    answers.push({ status: a.status, cancelRequested: a.cancelRequested, snap });
  };

  // One tick per run: rows are compared in the order their runs were created.
  const claimed = (task: Record<string, unknown>) => {
    clock.advance(1);
    return s.claimed(task);
  };
  const ok = await claimed({});
  keep(await s.starting(ok.fence));
  const renewed = await s.renew(ok.fence);
  expect(renewed).toMatchObject({ lease: { version: 1 }, cancelRequested: false });
  keep(await s.running({ ...ok.fence, leaseVersion: 1 }));
  clock.advance(250);
  keep(await s.complete({ ...ok.fence, leaseVersion: 1 }, 'succeeded', 0));

  // Failures retry with the policy's backoff (initial × multiplier^(n − 2)) until it is used up.
  const policy = { retry: { maxAttempts: 3, initialBackoffMs: 1_000, multiplier: 3, maxBackoffMs: 2_500 } };
  const retried = await claimed(policy);
  let attempt = retried;
  for (let n = 1; n <= 3; n++) {
    keep(await s.starting(attempt.fence));
    keep(await s.running(attempt.fence, `pid:${n}`));
    clock.advance(100);
    keep(await s.complete(attempt.fence, n === 2 ? 'timed_out' : 'failed', n === 3 ? null : -n));
    if (n < 3) {
      clock.advance(3_000);
      await s.f.leases.sweep(64);
      attempt = { ...retried, ...(await s.pulled(retried.worker)) };
    }
  }

  const spawnFails = await claimed(policy);
  keep(await s.starting(spawnFails.fence));
  keep(await s.startFailure(spawnFails.fence));

  const late = await claimed({ timeoutMs: 1_000 });
  keep(await s.starting(late.fence));
  clock.advance(1_000);
  keep(await s.startFailure(late.fence, 'exec_failed'));

  const cancelled = await claimed(policy);
  keep(await s.starting(cancelled.fence));
  const audit = { actor: 't', action: 'cancel', target: cancelled.run.id };
  await s.f.runs.requestCancel(cancelled.run.id, audit);
  expect(await s.renew(cancelled.fence)).toMatchObject({ cancelRequested: true });
  keep(await s.running({ ...cancelled.fence, leaseVersion: 1 }));
  keep(await s.complete({ ...cancelled.fence, leaseVersion: 1 }, 'failed', 1));

  // ADR 0047: runs that ended before their `running` report: the completion stands in for it.
  const fast = await claimed({});
  keep(await s.starting(fast.fence));
  clock.advance(20);
  keep(await s.fastComplete(fast.fence, 'succeeded', 0));
  // The step it stood in for: a replay (the explaining path, so not counted among applied steps).
  keep(await s.acts.running({ ...fast.fence, executorHandle: 'pid:7' }));
  const fastRetried = await claimed(policy);
  keep(await s.starting(fastRetried.fence));
  keep(await s.fastComplete(fastRetried.fence, 'failed', 2, 'pid:8'));
  const fastCancelled = await claimed({});
  keep(await s.starting(fastCancelled.fence));
  await s.f.runs.requestCancel(fastCancelled.run.id, { ...audit, target: fastCancelled.run.id });
  keep(await s.fastComplete(fastCancelled.fence, 'succeeded', 0));
  const fastOld = await claimed({});
  keep(await s.starting(fastOld.fence));
  keep(await s.fastComplete(await s.f.successor(fastOld.fence), 'succeeded', 0));

  // Restart recovery (ADR 0015): the worker's next session ends its predecessor's attempt.
  const old = await claimed(policy);
  keep(await s.starting(old.fence));
  keep(await s.running(old.fence));
  const successor = await s.f.successor(old.fence);
  keep(await s.complete({ ...successor, tokenDigest: leaseTokenDigest(old.token) }, 'succeeded', 0));
  return answers;
}

type Claimed = Awaited<ReturnType<Steps['claimed']>>;
type Refused = (s: Steps, c: Claimed, clock: { advance(ms: number): void }) => Promise<unknown>;

/** Calls that must be refused, each on a freshly claimed run (some after `starting` or `running`). */
const REFUSALS: Record<string, Refused> = {
  'session version': (s, c) =>
    s.starting({ ...c.fence, fence: { ...c.fence.fence, expectedVersion: c.fence.fence.expectedVersion + 1 } }),
  'session generation': (s, c) =>
    s.starting({ ...c.fence, fence: { ...c.fence.fence, generation: c.fence.fence.generation + 1 } }),
  'session expired': (s, c, clock) => {
    clock.advance(SESSION_LEASE);
    return s.starting(c.fence);
  },
  'worker disabled': async (s, c) => {
    await s.f.db.run('UPDATE workers SET disabled = :yes WHERE worker_id = :w', {
      yes: true,
      w: c.worker.workerId,
    });
    return s.starting(c.fence);
  },
  'other token': (s, c) => s.starting({ ...c.fence, tokenDigest: leaseTokenDigest(newToken()) }),
  'other session, same token, not a final step': async (s, c) => {
    await s.starting(c.fence);
    const replaced = await s.f.sessions.register({
      workerId: c.worker.workerId,
      sessionId: newSessionId(),
      snapshot: snapshot({ maxConcurrentRuns: 4, availableSlots: 4 }),
      leaseMs: SESSION_LEASE,
    });
    const { sessionId, generation, version } = replaced.session;
    return s.running({ ...c.fence, sessionId, fence: { generation, expectedVersion: version } });
  },
  'lease generation': (s, c) => s.starting({ ...c.fence, leaseGeneration: c.fence.leaseGeneration + 1 }),
  'lease version ahead': (s, c) => s.starting({ ...c.fence, leaseVersion: c.fence.leaseVersion + 1 }),
  'lease version two behind': async (s, c) => {
    await s.renew(c.fence);
    await s.renew({ ...c.fence, leaseVersion: 1 });
    return s.starting(c.fence);
  },
  'lease expired': (s, c, clock) => {
    clock.advance(RUN_LEASE);
    return s.starting(c.fence);
  },
  'running before starting': (s, c) => s.running(c.fence),
  'completion before running': async (s, c) => {
    await s.starting(c.fence);
    return s.complete(c.fence, 'succeeded', 0);
  },
  'completion with a handle before starting': (s, c) => s.fastComplete(c.fence, 'succeeded', 0),
  'completion with a handle after running with another': async (s, c) => {
    await s.starting(c.fence);
    await s.running(c.fence, 'pid:1');
    return s.fastComplete(c.fence, 'succeeded', 0, 'pid:2');
  },
  'completion with a handle on a stale lease version': async (s, c) => {
    await s.starting(c.fence);
    await s.renew(c.fence);
    await s.renew({ ...c.fence, leaseVersion: 1 });
    return s.fastComplete(c.fence, 'succeeded', 0);
  },
  'running with another handle after a completion with one': async (s, c) => {
    await s.starting(c.fence);
    await s.fastComplete(c.fence, 'succeeded', 0, 'pid:1');
    return s.running(c.fence, 'pid:2');
  },
  'running again with another handle': async (s, c) => {
    await s.starting(c.fence);
    await s.running(c.fence, 'pid:1');
    return s.running(c.fence, 'pid:2');
  },
  'start failure after running': async (s, c) => {
    await s.starting(c.fence);
    await s.running(c.fence);
    return s.startFailure(c.fence);
  },
  'renew, other token': (s, c) => s.renew({ ...c.fence, tokenDigest: leaseTokenDigest(newToken()) }),
  'renew, lease expired': (s, c, clock) => {
    clock.advance(RUN_LEASE);
    return s.renew(c.fence);
  },
};

const STEP_CALLS = new Set(['starting', 'running', 'startFailure', 'complete', 'fastComplete', 'renew']);

/** The refusal's area and reason, and whether the refused call wrote anything. */
async function refusal(s: Steps, refuse: Refused, clock: { advance(ms: number): void }) {
  const c = await s.claimed({});
  const before = { value: undefined as unknown };
  const tables = ['runs', 'attempts', 'run_leases', 'run_events', 'workers'];
  // The setup steps of a case run first; the snapshot is taken just before its last call.
  const last = new Proxy(s, {
    get(target, key, receiver) {
      const value = Reflect.get(target, key, receiver) as unknown;
      if (typeof value !== 'function' || !STEP_CALLS.has(String(key))) return value;
      return async (...args: unknown[]) => {
        before.value = await snapshotDatabase(s.f.db, tables);
        return (value as (...a: unknown[]) => Promise<unknown>).apply(target, args);
      };
    },
  });
  const error = await refuse(last, c, clock).then(
    () => null,
    (e: unknown) => e,
  );
  const wrote = JSON.stringify(await snapshotDatabase(s.f.db, tables)) !== JSON.stringify(before.value);
  return error instanceof FencedError
    ? { area: error.area, reason: error.reason, wrote }
    : { error: String(error), wrote };
}

describe('lease steps in one statement on PostgreSQL (ADR 0017)', () => {
  const targets = { sqlite: sqliteDispatchTarget(), postgres: postgresDispatchTarget() };
  const steps: Partial<Record<keyof typeof targets, Steps>> = {};
  let plain: { db: PostgresDatabase; drop: () => Promise<void> } | undefined;

  beforeAll(async () => {
    for (const [dialect, target] of Object.entries(targets))
      steps[dialect as keyof typeof targets] = new Steps(new DispatchFixture(await target.open()), target);
  });
  afterAll(async () => {
    await plain?.db.close();
    await plain?.drop();
    for (const target of Object.values(targets)) await target.dispose();
  });

  it('the same scenarios leave the same rows and answers on both dialects; PostgreSQL applies each step in one statement', async () => {
    const answers = {
      sqlite: await scenarios(steps.sqlite!, targets.sqlite.clock),
      postgres: await scenarios(steps.postgres!, targets.postgres.clock),
    };
    expect(answers.postgres).toEqual(answers.sqlite);
    expect(await steps.postgres!.rows()).toEqual(await steps.sqlite!.rows());
    const pg = steps.postgres!.costs;
    expect(Object.keys(pg).sort()).toEqual([
      'completion',
      'fast_completion',
      'renew',
      'running',
      'start_failure',
      'starting',
    ]);
    for (const [step, costs] of Object.entries(pg)) expect({ step, costs }).toEqual({ step, costs: costs.map(() => 1) });
    // SQLite: renew is one statement too; the other steps keep a transaction, lean (ADR 0025).
    const sqlite = steps.sqlite!;
    const seen = Object.fromEntries(
      Object.keys(sqlite.costs).map((step) => [
        step,
        { statements: [...new Set(sqlite.costs[step])], rows: [...new Set(sqlite.rowsBack[step])] },
      ]),
    );
    const expected = Object.fromEntries(
      Object.entries(SQLITE_STEP_COST).map(([step, c]) => [step, { statements: [c.statements], rows: [c.rows] }]),
    );
    expect(seen).toEqual(expected);
  });

  it.each(Object.keys(REFUSALS))('refused as on SQLite, writing nothing: %s', async (name) => {
    const seen: Record<string, unknown> = {};
    for (const dialect of ['sqlite', 'postgres'] as const) {
      await steps[dialect]!.f.db.run('UPDATE workers SET disabled = :no', { no: false });
      seen[dialect] = await refusal(steps[dialect]!, REFUSALS[name]!, targets[dialect].clock);
    }
    expect(seen.sqlite).toMatchObject({ area: expect.any(String), wrote: false });
    expect(seen.postgres).toEqual(seen.sqlite);
  });

  it('a step whose statement a deadlock rolled back is applied by the retrying transaction', async () => {
    const s = steps.postgres!;
    const c = await s.claimed({});
    const other = await targets.postgres.openSecond();
    let step: Promise<unknown> | undefined;
    await other.transaction(async (tx) => {
      // Only the step's backend may detect the deadlock (after the server's 1 s): were this one the
      // victim on a loaded machine, its retry would call the step a second time (already_starting).
      await tx.run("SET LOCAL deadlock_timeout = '60s'", {});
      await tx.one('SELECT id FROM runs WHERE id = :id {forUpdate}', { id: c.run.id });
      step = s.starting(c.fence); // takes the lease, then waits for the run row
      // Bounded poll: the server has no event for "a backend started waiting on a lock" (the
      // statement's text is long; pg_stat_activity keeps its start).
      for (let i = 0; ; i++) {
        const waiting = await other.one<{ n: string }>(
          `SELECT count(*) AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'SELECT (s.lease).%'`,
        );
        if (Number(waiting!.n) > 0) break;
        if (i > 500) throw new Error('the step never waited for the run row');
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      // Lease after run, against the step's order: the step's backend waited first, so it detects the
      // deadlock and its statement is rolled back; this lock is granted then.
      await tx.one('SELECT offer_id FROM run_leases WHERE offer_id = :o {forUpdate}', { o: c.fence.offerId });
    });
    expect(await step).toMatchObject({ status: 'applied', snapshot: { attemptStatus: 'starting' } });
    expect(s.costs.starting!.at(-1)).toBeGreaterThan(1);
  });

  it('on the database clock (no model clock), a step is one statement and times come from the server', async () => {
    const database = await createPostgresDatabase();
    const db = await PostgresDatabase.open({ url: database.url, poolSize: 2 }, false);
    plain = { db, drop: () => database.drop() };
    const s = new Steps(new DispatchFixture(db));
    const c = await s.claimed({ timeoutMs: 5_000 });
    const before = Date.now();
    const started = await s.starting(c.fence);
    const after = Date.now();
    expect(started.snapshot.startedAt).toBeGreaterThanOrEqual(before - 1_000);
    expect(started.snapshot.startedAt).toBeLessThanOrEqual(after + 1_000);
    expect(started.snapshot.deadlineAt).toBe(started.snapshot.startedAt! + 5_000);
    await s.renew(c.fence);
    await s.running({ ...c.fence, leaseVersion: 1 });
    const done = await s.complete({ ...c.fence, leaseVersion: 1 }, 'succeeded', 0);
    expect(done.snapshot).toMatchObject({ runStatus: 'succeeded', attemptStatus: 'succeeded', leaseVersion: 2 });
    expect(done.snapshot.finishedAt).toBeGreaterThanOrEqual(started.snapshot.startedAt!);
    expect(s.costs).toEqual({ starting: [1], renew: [1], running: [1], completion: [1] });
  });
});
