// Size: one fast-check command model — the model state, every command (pull, replay, renew, release,
// start, expire, sweep, heartbeat, replace) and its invariants — must be read together to be checked.
import { isDeepStrictEqual } from 'node:util';
import fc from 'fast-check';
import {
  AttemptStatus,
  ClaimResult,
  FenceReason,
  RetryPolicy,
  RunStatus,
  SessionFence,
  SweepResult,
  leaseTokenDigest,
  retryBackoffMs,
} from '@ql/domain';
import { SqlDatabase, toInt, toMs, toMsOrNull } from '@ql/persistence';
import { ManualClock, newSessionId, snapshot } from '../support/fixtures';
import {
  DispatchFixture,
  PREFERENCE_HOLD,
  DispatchTarget,
  RUN_LEASE,
  expectFence,
  newToken,
  offered,
} from './dispatch.contract';
import { CURRENT_SOFTWARE } from '../support/placement-fixtures';

/**
 * A fast-check command model of dispatch leases (R-LSE-1..6, R-RUN-4) against the real adapters and
 * a controllable clock: pulls, replays, renews, releases, starts, clock moves, sweeps, heartbeats and
 * session replacements, each checked against what the model says it must do, and every invariant
 * re-read from the database after every command.
 */

const WORKERS = 3;
const CAPACITY = 2;
const RUNS = 6;
/** Short enough that a few clock moves without a heartbeat expire a session. */
const SESSION_MS = 90_000;
const SWEEP_PAGE = 64;
const RETRY = { maxAttempts: 3, initialBackoffMs: 1_000 };

interface SessionModel {
  readonly workerIdx: number;
  readonly sessionId: string;
  fence: SessionFence;
  expiresAt: number;
}

interface WorkerModel {
  readonly workerId: string;
  current: SessionModel;
  /** Replaced sessions, oldest first: fenced for ever. */
  readonly old: SessionModel[];
}

interface LeaseModel {
  readonly offerId: string;
  readonly token: string;
  readonly workerIdx: number;
  readonly sessionId: string;
  readonly sessionGeneration: number;
  readonly attemptId: string;
  readonly runId: string;
  readonly generation: number;
  readonly claimedAt: number;
  version: number;
  state: 'active' | 'released' | 'expired';
  expiresAt: number;
}

interface AttemptModel {
  readonly id: string;
  readonly runId: string;
  readonly attemptNo: number;
  status: Extract<AttemptStatus, 'claimed' | 'starting' | 'lost'>;
  leaseGeneration: number;
}

interface RunModel {
  readonly id: string;
  status: RunStatus;
  attemptCount: number;
  currentAttemptId: string | null;
  queueOrder: number;
  nextAttemptAt: number | null;
  events: number;
}

interface Model {
  now: number;
  readonly workers: WorkerModel[];
  readonly leases: LeaseModel[];
  readonly attempts: Map<string, AttemptModel>;
  /** In creation (= id) order. */
  readonly runs: RunModel[];
}

interface Real {
  readonly f: DispatchFixture;
  readonly clock: ManualClock;
  readonly policy: RetryPolicy;
  /** Highest version seen per (attempt, lease generation), and highest lease generation per attempt. */
  readonly versions: Map<string, number>;
  readonly generations: Map<string, number>;
}

type Expected = { area: 'session' | 'lease'; reason: FenceReason } | null;
type Via = 'own' | 'current' | 'other';
/**
 * `lostRenewal`: the version one renewal behind (that renewal's answer was lost), accepted; a renew
 * with it is answered as it stands. `oldVersion`: two or more behind, or ahead: refused.
 */
type Fault = 'none' | 'wrongToken' | 'lostRenewal' | 'oldVersion';

/** Outcome counts over the whole property (printed with QL_LEASE_MODEL_STATS=1). */
const stats = new Map<string, number>();
function count(key: string): void {
  stats.set(key, (stats.get(key) ?? 0) + 1);
}

function run(m: Model, id: string): RunModel {
  return m.runs.find((r) => r.id === id)!;
}

function sessionOf(m: Model, lease: LeaseModel): SessionModel {
  const worker = m.workers[lease.workerIdx]!;
  return [worker.current, ...worker.old].find((s) => s.sessionId === lease.sessionId)!;
}

/** R-REG-5 for the sessions the model drives (never disabled, offline or carrying a stale version). */
function sessionFault(m: Model, session: SessionModel): FenceReason | null {
  if (m.workers[session.workerIdx]!.current !== session) return 'session_replaced';
  if (session.expiresAt <= m.now) return 'session_expired';
  return null;
}

/**
 * R-LSE-4, in the order the adapters name it: session, then token, state, term, version. With
 * `successorAllowed` (release), the worker's later session may name its earlier session's lease with
 * its token, and no version is asked of it (ADR 0015).
 */
function leaseFault(
  m: Model,
  sender: SessionModel,
  lease: LeaseModel,
  token: string,
  version: number,
  successorAllowed = false,
): Expected {
  const session = sessionFault(m, sender);
  if (session) return { area: 'session', reason: session };
  const successor =
    successorAllowed &&
    sender.workerIdx === lease.workerIdx &&
    sender.sessionId !== lease.sessionId &&
    token === lease.token;
  if (
    !successor &&
    (sender.workerIdx !== lease.workerIdx || sender.sessionId !== lease.sessionId || token !== lease.token)
  )
    return { area: 'lease', reason: 'lease_token_mismatch' };
  if (lease.state !== 'active') return { area: 'lease', reason: 'lease_not_active' };
  if (lease.expiresAt <= m.now) return { area: 'lease', reason: 'lease_expired' };
  if (!successor && version !== lease.version && version !== lease.version - 1)
    return { area: 'lease', reason: 'lease_version_mismatch' };
  return null;
}

/** The worker's leases in state active (`held`), and those of them still inside their term (`live`). */
/** The slots of the worker's current session: a replaced session's leases count for nobody (R-RUN-7). */
function workerLeases(m: Model, workerIdx: number): { held: number; live: number } {
  const current = m.workers[workerIdx]!.current.sessionId;
  const held = m.leases.filter(
    (l) => l.workerIdx === workerIdx && l.sessionId === current && l.state === 'active',
  );
  return { held: held.length, live: held.filter((l) => l.expiresAt > m.now).length };
}

/** Which worker a command aims at: `prefer` picks among those whose current session is live (or expired). */
interface WorkerRef {
  readonly index: number;
  readonly prefer: boolean;
}

function workerFor(m: Model, ref: WorkerRef, wantLive: boolean): number {
  const all = m.workers.map((_w, i) => i);
  const preferred = ref.prefer ? all.filter((i) => m.workers[i]!.current.expiresAt > m.now === wantLive) : [];
  const from = preferred.length > 0 ? preferred : all;
  return from[ref.index % from.length]!;
}

function workerString(ref: WorkerRef, preferred: string): string {
  return `w${ref.index}${ref.prefer ? ` (${preferred})` : ''}`;
}

/** Priority is equal for all runs: FIFO by queue time, then id. */
function nextQueued(m: Model): RunModel | undefined {
  return m.runs
    .filter((r) => r.status === 'queued')
    .sort((a, b) => a.queueOrder - b.queueOrder || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))[0];
}

function requeue(m: Model, r: RunModel, events: number): void {
  r.status = 'queued';
  r.queueOrder = m.now;
  r.nextAttemptAt = null;
  r.events += events;
}

/** Which earlier lease a command aims at: mostly one still active, else any (stale ones included). */
interface LeaseRef {
  readonly index: number;
  readonly live: boolean;
}

function pick(m: Model, ref: LeaseRef): LeaseModel {
  const active = ref.live ? m.leases.filter((l) => l.state === 'active') : [];
  const from = active.length > 0 ? active : m.leases;
  return from[ref.index % from.length]!;
}

function expectIdle(result: ClaimResult, reason: 'no_capacity' | 'no_queued_runs', held: number): void {
  expectSame(result, { kind: 'idle', reason, activeLeases: held, capacity: CAPACITY, scanned: 0 });
}

function startable(m: Readonly<Model>): LeaseModel[] {
  return m.leases.filter(
    (l) =>
      l.state === 'active' &&
      l.expiresAt > m.now &&
      m.attempts.get(l.attemptId)!.status === 'claimed' &&
      sessionFault(m, sessionOf(m, l)) === null,
  );
}

function refString(ref: LeaseRef): string {
  return `lease ${ref.index}${ref.live ? ' (live)' : ''}`;
}

function senderFor(m: Model, lease: LeaseModel, via: Via): SessionModel {
  if (via === 'own') return sessionOf(m, lease);
  if (via === 'current') return m.workers[lease.workerIdx]!.current;
  return m.workers[(lease.workerIdx + 1) % WORKERS]!.current;
}

function leaseCommand(m: Model, sender: SessionModel, lease: LeaseModel, token: string, version: number) {
  return {
    workerId: m.workers[sender.workerIdx]!.workerId,
    sessionId: sender.sessionId,
    fence: sender.fence,
    offerId: lease.offerId,
    tokenDigest: leaseTokenDigest(token),
    leaseGeneration: lease.generation,
    leaseVersion: version,
    leaseMs: RUN_LEASE,
  };
}

function faultyInputs(lease: LeaseModel, fault: Fault) {
  return {
    token: fault === 'wrongToken' ? newToken() : lease.token,
    version:
      fault === 'oldVersion'
        ? lease.version >= 2
          ? lease.version - 2
          : lease.version + 1
        : fault === 'lostRenewal' && lease.version > 0
          ? lease.version - 1
          : lease.version,
  };
}

/** Every command checks its own outcome, then every invariant against the database. */
abstract class ModelCommand implements fc.AsyncCommand<Model, Real> {
  check(_m: Readonly<Model>): boolean {
    return true;
  }
  async run(m: Model, r: Real): Promise<void> {
    count(`#${this.constructor.name}`);
    await this.apply(m, r);
    await checkInvariants(m, r);
  }
  protected abstract apply(m: Model, r: Real): Promise<void>;
  abstract toString(): string;
}

/** Pull with a fresh offer id and token; `fromOld` sends it from the worker's last replaced session. */
class Pull extends ModelCommand {
  constructor(
    readonly ref: WorkerRef,
    readonly fromOld: boolean,
  ) {
    super();
  }
  protected async apply(m: Model, r: Real): Promise<void> {
    const w = workerFor(m, this.ref, true);
    const worker = m.workers[w]!;
    const sender =
      this.fromOld && worker.old.length > 0 ? worker.old[worker.old.length - 1]! : worker.current;
    const offerId = r.f.ids.uuidV7();
    const token = newToken();
    const call = r.f.leases.claim({
      workerId: worker.workerId,
      sessionId: sender.sessionId,
      fence: sender.fence,
      offerId,
      tokenDigest: leaseTokenDigest(token),
      software: CURRENT_SOFTWARE,
      leaseMs: RUN_LEASE,
      preferenceHoldMs: PREFERENCE_HOLD,
    });
    const fault = sessionFault(m, sender);
    if (fault) {
      count(`pull: ${fault}`);
      return expectFence(call, 'session', fault);
    }
    // ADR 0005: a lease holds its slot until it is released or swept, also after its term has passed.
    const { held, live } = workerLeases(m, w);
    const result = await call;
    if (held >= CAPACITY) {
      count(live < held ? 'pull: no_capacity (expired, not swept yet)' : 'pull: no_capacity');
      return expectIdle(result, 'no_capacity', held);
    }
    const next = nextQueued(m);
    if (!next) {
      count('pull: no_queued_runs');
      return expectIdle(result, 'no_queued_runs', held);
    }
    if (result.kind !== 'offered' || result.replayed)
      throw new Error(`expected run ${next.id} to be offered, got ${JSON.stringify(result)}`);
    const offer = result.offer;
    expect(offer.run.id).toBe(next.id);
    let attempt: AttemptModel;
    if (next.currentAttemptId) {
      // R-LSE-5: the same unstarted attempt under the next lease generation.
      attempt = m.attempts.get(next.currentAttemptId)!;
      expect(attempt.status).toBe('claimed');
      attempt.leaseGeneration++;
      count('pull: offered again');
    } else {
      attempt = {
        id: offer.attempt.id,
        runId: next.id,
        attemptNo: next.attemptCount + 1,
        status: 'claimed',
        leaseGeneration: 1,
      };
      expect(m.attempts.has(attempt.id)).toBe(false);
      m.attempts.set(attempt.id, attempt);
      count(`pull: offered attempt ${attempt.attemptNo}`);
    }
    expect(offer.attempt).toMatchObject({
      id: attempt.id,
      runId: next.id,
      attemptNo: attempt.attemptNo,
      status: 'claimed',
      workerId: worker.workerId,
      leaseGeneration: attempt.leaseGeneration,
    });
    const lease: LeaseModel = {
      offerId,
      token,
      workerIdx: w,
      sessionId: sender.sessionId,
      sessionGeneration: sender.fence.generation,
      attemptId: attempt.id,
      runId: next.id,
      generation: attempt.leaseGeneration,
      claimedAt: m.now,
      version: 0,
      state: 'active',
      expiresAt: m.now + RUN_LEASE,
    };
    expect(offer.lease).toEqual(leaseRecord(m, lease));
    m.leases.push(lease);
    next.status = 'dispatching';
    next.currentAttemptId = attempt.id;
    next.attemptCount = attempt.attemptNo;
    next.events += 2;
  }
  toString(): string {
    return `Pull(${workerString(this.ref, 'live')}${this.fromOld ? ', old session' : ''})`;
  }
}

/** R-LSE-3: the offer id and token of an earlier pull, sent again (or by someone else, or with another token). */
class Replay extends ModelCommand {
  constructor(
    readonly lease: LeaseRef,
    readonly via: Via,
    readonly wrongToken: boolean,
  ) {
    super();
  }
  override check(m: Readonly<Model>): boolean {
    return m.leases.length > 0;
  }
  protected async apply(m: Model, r: Real): Promise<void> {
    const lease = pick(m, this.lease);
    const sender = senderFor(m, lease, this.via);
    const token = this.wrongToken ? newToken() : lease.token;
    const before = [await r.f.count('run_events'), await r.f.count('run_leases')];
    const call = r.f.leases.claim({
      workerId: m.workers[sender.workerIdx]!.workerId,
      sessionId: sender.sessionId,
      fence: sender.fence,
      offerId: lease.offerId,
      tokenDigest: leaseTokenDigest(token),
      software: CURRENT_SOFTWARE,
      leaseMs: RUN_LEASE,
      preferenceHoldMs: PREFERENCE_HOLD,
    });
    const session = sessionFault(m, sender);
    let expected: Expected = null;
    if (session) expected = { area: 'session', reason: session };
    else if (sender.workerIdx !== lease.workerIdx || sender.sessionId !== lease.sessionId || this.wrongToken)
      expected = { area: 'lease', reason: 'offer_conflict' };
    else if (lease.state !== 'active') expected = { area: 'lease', reason: 'lease_not_active' };
    else if (lease.expiresAt <= m.now) expected = { area: 'lease', reason: 'lease_expired' };
    if (expected) {
      count(`replay: ${expected.reason}`);
      await expectFence(call, expected.area, expected.reason);
    } else {
      count('replay: offered');
      const result = await call;
      expect(result).toMatchObject({ kind: 'offered', replayed: true });
      const offer = offered(result);
      expect(offer.lease).toEqual(leaseRecord(m, lease));
      expect(offer.run.id).toBe(lease.runId);
      expect(offer.attempt.id).toBe(lease.attemptId);
    }
    // Recovery never creates a second lease or event.
    expect([await r.f.count('run_events'), await r.f.count('run_leases')]).toEqual(before);
  }
  toString(): string {
    return `Replay(${refString(this.lease)}, via ${this.via}${this.wrongToken ? ', wrong token' : ''})`;
  }
}

/** R-LSE-4: renew with what the holder last saw, or with a wrong token or version. */
class Renew extends ModelCommand {
  constructor(
    readonly lease: LeaseRef,
    readonly via: Exclude<Via, 'other'>,
    readonly fault: Fault,
  ) {
    super();
  }
  override check(m: Readonly<Model>): boolean {
    return m.leases.length > 0;
  }
  protected async apply(m: Model, r: Real): Promise<void> {
    const lease = pick(m, this.lease);
    const sender = senderFor(m, lease, this.via);
    const { token, version } = faultyInputs(lease, this.fault);
    const call = r.f.leases.renew(leaseCommand(m, sender, lease, token, version));
    const expected = leaseFault(m, sender, lease, token, version);
    if (expected) {
      count(`renew: ${expected.reason}`);
      // A stale token, session or version never renews.
      return expectFence(call, expected.area, expected.reason);
    }
    const renewed = await call;
    if (version === lease.version - 1) {
      count('renew: replayed');
      expect(renewed).toEqual({ lease: leaseRecord(m, lease), cancelRequested: false });
      return;
    }
    count('renew: renewed');
    lease.version++;
    lease.expiresAt = m.now + RUN_LEASE;
    expect(renewed).toEqual({ lease: leaseRecord(m, lease), cancelRequested: false });
  }
  toString(): string {
    return `Renew(${refString(this.lease)}, via ${this.via}, ${this.fault})`;
  }
}

/** R-LSE-5: before start only, the attempt goes back to the queue. */
class Release extends ModelCommand {
  constructor(
    readonly lease: LeaseRef,
    readonly via: Exclude<Via, 'other'>,
    readonly fault: Fault,
  ) {
    super();
  }
  override check(m: Readonly<Model>): boolean {
    return m.leases.length > 0;
  }
  protected async apply(m: Model, r: Real): Promise<void> {
    const lease = pick(m, this.lease);
    const sender = senderFor(m, lease, this.via);
    const { token, version } = faultyInputs(lease, this.fault);
    const call = r.f.leases.release(leaseCommand(m, sender, lease, token, version));
    const attempt = m.attempts.get(lease.attemptId)!;
    const expected =
      leaseFault(m, sender, lease, token, version, true) ??
      (attempt.status !== 'claimed' ? { area: 'lease' as const, reason: 'attempt_started' as const } : null);
    if (expected) {
      count(`release: ${expected.reason}`);
      return expectFence(call, expected.area, expected.reason);
    }
    count('release: released');
    const ended = await call;
    lease.state = 'released';
    lease.version++;
    lease.expiresAt = m.now;
    expect(ended).toEqual(leaseRecord(m, lease));
    requeue(m, run(m, lease.runId), 2);
  }
  toString(): string {
    return `Release(${refString(this.lease)}, via ${this.via}, ${this.fault})`;
  }
}

/** The holder of a live lease acknowledges `starting` (stands in for the activation of the next issue). */
class Start extends ModelCommand {
  constructor(readonly index: number) {
    super();
  }
  override check(m: Readonly<Model>): boolean {
    return startable(m).length > 0;
  }
  protected async apply(m: Model, r: Real): Promise<void> {
    const candidates = startable(m);
    const lease = candidates[this.index % candidates.length]!;
    await r.f.markStarted(lease.attemptId);
    m.attempts.get(lease.attemptId)!.status = 'starting';
    count('start');
  }
  toString(): string {
    return `Start(${this.index})`;
  }
}

class Advance extends ModelCommand {
  constructor(
    readonly ms: number,
    readonly thenSweep: boolean,
  ) {
    super();
  }
  protected async apply(m: Model, r: Real): Promise<void> {
    m.now += this.ms;
    r.clock.advance(this.ms);
    expect(r.clock.now()).toBe(m.now);
    if (this.thenSweep) await sweep(m, r);
  }
  toString(): string {
    return `Advance(${this.ms}${this.thenSweep ? ', sweep' : ''})`;
  }
}

class Sweep extends ModelCommand {
  protected async apply(m: Model, r: Real): Promise<void> {
    await sweep(m, r);
  }
  toString(): string {
    return 'Sweep';
  }
}

/** R-LSE-6, R-RUN-4: expired leases requeue (unstarted) or lose the attempt (retry or lost); due retries requeue. */
async function sweep(m: Model, r: Real): Promise<void> {
  const expected: { -readonly [K in keyof SweepResult]: number } = {
    requeued: 0,
    lost: 0,
    cancelled: 0,
    retried: 0,
    failed: 0,
  };
  for (const lease of m.leases) {
    if (lease.state !== 'active' || lease.expiresAt > m.now) continue;
    lease.state = 'expired';
    lease.version++;
    lease.expiresAt = m.now;
    const attempt = m.attempts.get(lease.attemptId)!;
    const target = run(m, lease.runId);
    if (attempt.status === 'claimed') {
      requeue(m, target, 2);
      expected.requeued++;
    } else {
      attempt.status = 'lost';
      target.events += 3;
      if (attempt.attemptNo >= r.policy.maxAttempts) {
        target.status = 'lost';
        expected.failed++;
      } else {
        target.status = 'retry_wait';
        target.nextAttemptAt = m.now + retryBackoffMs(r.policy, attempt.attemptNo + 1);
        expected.lost++;
      }
    }
  }
  for (const due of m.runs) {
    if (due.status !== 'retry_wait' || due.nextAttemptAt! > m.now) continue;
    requeue(m, due, 1);
    due.currentAttemptId = null;
    expected.retried++;
  }
  for (const [key, n] of Object.entries(expected)) if (n > 0) count(`sweep: ${key}`);
  expect(await r.f.leases.sweep(SWEEP_PAGE)).toEqual(expected);
}

class Heartbeat extends ModelCommand {
  constructor(readonly w: number) {
    super();
  }
  protected async apply(m: Model, r: Real): Promise<void> {
    const worker = m.workers[this.w]!;
    const session = worker.current;
    const call = r.f.sessions.heartbeat({
      workerId: worker.workerId,
      sessionId: session.sessionId,
      fence: session.fence,
      leaseMs: SESSION_MS,
      availableSlots: CAPACITY,
    });
    if (session.expiresAt <= m.now) {
      count('heartbeat: session_expired');
      return expectFence(call, 'session', 'session_expired');
    }
    count('heartbeat: ok');
    const beat = await call;
    expect(beat).toMatchObject({
      sessionId: session.sessionId,
      generation: session.fence.generation,
      version: session.fence.expectedVersion + 1,
      leaseExpiresAt: m.now + SESSION_MS,
      availableSlots: CAPACITY,
    });
    session.fence = { generation: beat.generation, expectedVersion: beat.version };
    session.expiresAt = beat.leaseExpiresAt;
  }
  toString(): string {
    return `Heartbeat(w${this.w})`;
  }
}

/** R-REG-4: a new session for the worker; the old one is fenced for ever. */
class ReplaceSession extends ModelCommand {
  constructor(readonly ref: WorkerRef) {
    super();
  }
  protected async apply(m: Model, r: Real): Promise<void> {
    const w = workerFor(m, this.ref, false);
    const worker = m.workers[w]!;
    const previous = worker.current;
    const result = await r.f.sessions.register({
      workerId: worker.workerId,
      sessionId: newSessionId(),
      snapshot: snapshot({ maxConcurrentRuns: CAPACITY, availableSlots: CAPACITY }),
      leaseMs: SESSION_MS,
    });
    expect(result.outcome).toBe('replaced');
    expect(result.session).toMatchObject({
      generation: previous.fence.generation + 1,
      version: previous.fence.expectedVersion + 1,
      leaseExpiresAt: m.now + SESSION_MS,
    });
    worker.old.push(previous);
    worker.current = {
      workerIdx: w,
      sessionId: result.session.sessionId,
      fence: { generation: result.session.generation, expectedVersion: result.session.version },
      expiresAt: result.session.leaseExpiresAt,
    };
    count('replace session');
  }
  toString(): string {
    return `ReplaceSession(${workerString(this.ref, 'expired')})`;
  }
}

/** The lease as the adapters return it (no token, no digest). */
function leaseRecord(m: Model, lease: LeaseModel) {
  return {
    offerId: lease.offerId,
    attemptId: lease.attemptId,
    runId: lease.runId,
    workerId: m.workers[lease.workerIdx]!.workerId,
    sessionId: lease.sessionId,
    sessionGeneration: lease.sessionGeneration,
    leaseGeneration: lease.generation,
    version: lease.version,
    state: lease.state,
    expiresAt: lease.expiresAt,
    claimedAt: lease.claimedAt,
  };
}

interface Rows {
  workers: { worker_id: string; active_leases: number | string }[];
  runs: {
    id: string;
    status: RunStatus;
    attempt_count: number;
    current_attempt_id: string | null;
    event_seq: number | string;
    queue_order: number | string;
    next_attempt_at: number | Date | null;
    finished_at: number | Date | null;
  }[];
  attempts: {
    id: string;
    run_id: string;
    attempt_no: number;
    status: AttemptStatus;
    lease_generation: number;
  }[];
  leases: {
    attempt_id: string;
    lease_generation: number;
    offer_id: string;
    run_id: string;
    worker_id: string;
    session_id: string;
    version: number | string;
    state: string;
    expires_at: number | Date;
  }[];
  events: { run_id: string; seq: number | string; type: string }[];
}

async function readRows(db: SqlDatabase, workerIds: readonly string[]): Promise<Rows> {
  return {
    workers: await db.many(
      `SELECT worker_id, active_leases FROM workers WHERE worker_id IN (:w0, :w1, :w2)`,
      {
        w0: workerIds[0]!,
        w1: workerIds[1]!,
        w2: workerIds[2]!,
      },
    ),
    runs: await db.many(
      `SELECT id, status, attempt_count, current_attempt_id, event_seq, queue_order, next_attempt_at, finished_at
       FROM runs`,
    ),
    attempts: await db.many(`SELECT id, run_id, attempt_no, status, lease_generation FROM attempts`),
    leases: await db.many(
      `SELECT attempt_id, lease_generation, offer_id, run_id, worker_id, session_id, version, state, expires_at
       FROM run_leases`,
    ),
    events: await db.many(`SELECT run_id, seq, type FROM run_events ORDER BY run_id, seq`),
  };
}

/** Plain checks (a jest matcher per check would cost more than the database round trips). */
function invariant(ok: boolean, message: () => string): void {
  if (!ok) throw new Error(`invariant violated: ${message()}`);
}

/** Deep equality first, and the matcher (for its diff) only when they differ. */
function expectSame(actual: unknown, expected: unknown): void {
  if (!isDeepStrictEqual(actual, expected)) expect(actual).toEqual(expected);
}

const byKey =
  <T>(key: (x: T) => string) =>
  (a: T, b: T) =>
    key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0;

/** Read back from the database after every command: the invariants, then the model itself. */
async function checkInvariants(m: Model, r: Real): Promise<void> {
  const rows = await readRows(
    r.f.db,
    m.workers.map((w) => w.workerId),
  );
  const leases = rows.leases.map((l) => ({
    ...l,
    lease_generation: toInt(l.lease_generation),
    version: toInt(l.version),
    expires_at: toMs(l.expires_at),
  }));
  const active = leases.filter((l) => l.state === 'active');

  // At most one active lease per attempt.
  const activeAttempts = new Set(active.map((l) => l.attempt_id));
  invariant(activeAttempts.size === active.length, () => 'two active leases on one attempt');

  // Lease versions only grow per (attempt, generation); generations of an attempt only grow, 1..n.
  for (const l of leases) {
    const key = `${l.attempt_id}:${l.lease_generation}`;
    const seen = r.versions.get(key) ?? 0;
    invariant(l.version >= seen, () => `lease ${key} went from version ${seen} to ${l.version}`);
    r.versions.set(key, l.version);
  }
  for (const a of rows.attempts) {
    const generations = leases
      .filter((l) => l.attempt_id === a.id)
      .map((l) => l.lease_generation)
      .sort((x, y) => x - y);
    invariant(
      generations.every((g, i) => g === i + 1),
      () => `attempt ${a.id} has lease generations ${generations.join(',')}`,
    );
    const max = generations[generations.length - 1] ?? 0;
    const seen = r.generations.get(a.id) ?? 0;
    invariant(max >= seen, () => `attempt ${a.id} went from lease generation ${seen} to ${max}`);
    invariant(toInt(a.lease_generation) === max, () => `attempt ${a.id} is not at its last lease generation`);
    r.generations.set(a.id, max);
  }

  // No session holds more live leases than its capacity; with ADR 0005's conservative slot counter not
  // even counting those past their term, and the counter is exact for the current session (R-RUN-7).
  invariant(rows.workers.length === WORKERS, () => `${rows.workers.length} workers`);
  for (const sessionId of new Set(active.map((l) => l.session_id))) {
    const held = active.filter((l) => l.session_id === sessionId).length;
    invariant(held <= CAPACITY, () => `session ${sessionId} holds ${held}`);
  }
  for (const w of rows.workers) {
    const current = m.workers.find((x) => x.workerId === w.worker_id)!.current.sessionId;
    const held = active.filter((l) => l.worker_id === w.worker_id && l.session_id === current);
    const live = held.filter((l) => l.expires_at > m.now).length;
    invariant(
      live <= CAPACITY && held.length <= CAPACITY,
      () => `worker ${w.worker_id} holds ${held.length}`,
    );
    invariant(
      toInt(w.active_leases) === held.length,
      () => `worker ${w.worker_id} counts ${w.active_leases} active leases, holds ${held.length}`,
    );
  }

  // Nothing is lost: every run is in exactly one accounted-for state, its events numbered 1..n.
  invariant(rows.runs.length === RUNS, () => `${rows.runs.length} runs`);
  for (const row of rows.runs) {
    const held = active.filter((l) => l.run_id === row.id);
    const attempts = rows.attempts.filter((a) => a.run_id === row.id);
    const current = attempts.find((a) => a.id === row.current_attempt_id);
    const events = rows.events.filter((e) => e.run_id === row.id);
    const types = events.map((e) => e.type);
    const fail = (what: string) => () => `run ${row.id} (${row.status}): ${what}; events ${types.join(' ')}`;
    invariant(
      events.every((e, i) => toInt(e.seq) === i + 1),
      fail('event seq not 1..n'),
    );
    invariant(toInt(row.event_seq) === events.length, fail(`event_seq ${row.event_seq}`));
    invariant(types[0] === 'run.created', fail('first event'));
    const numbers = attempts.map((a) => toInt(a.attempt_no)).sort((x, y) => x - y);
    invariant(
      numbers.every((n, i) => n === i + 1) && toInt(row.attempt_count) === attempts.length,
      fail(`attempts ${numbers.join(',')} of ${row.attempt_count}`),
    );
    switch (row.status) {
      case 'queued':
        invariant(held.length === 0, fail('queued with an active lease'));
        invariant(
          !row.current_attempt_id || current?.status === 'claimed',
          fail('requeued a started attempt'),
        );
        break;
      case 'dispatching':
      case 'running':
        invariant(held.length === 1, fail(`${held.length} active leases`));
        invariant(held[0]!.attempt_id === row.current_attempt_id, fail('lease on another attempt'));
        invariant(
          held[0]!.lease_generation === toInt(current!.lease_generation),
          fail('lease generation behind its attempt'),
        );
        break;
      case 'retry_wait':
        invariant(held.length === 0, fail('waiting with an active lease'));
        invariant(row.next_attempt_at !== null, fail('no next attempt time'));
        invariant(current?.status === 'lost', fail('current attempt not lost'));
        invariant(types[types.length - 1] === 'run.retry_scheduled', fail('last event'));
        break;
      default:
        // Only the sweeper ends a run here: the retry policy used up, every attempt lost.
        invariant(row.status === 'lost', fail('terminal other than lost'));
        invariant(held.length === 0 && row.finished_at !== null, fail('lost but held or unfinished'));
        invariant(
          attempts.length === RETRY.maxAttempts && attempts.every((a) => a.status === 'lost'),
          fail('lost before its retry policy was used up'),
        );
        invariant(
          types.slice(-3).join(' ') === 'attempt.lease_expired attempt.finished run.finished',
          fail('not ended by the sweeper'),
        );
    }
  }

  // The model, field by field.
  expectSame(
    rows.runs
      .map((row) => ({
        id: row.id,
        status: row.status,
        attemptCount: toInt(row.attempt_count),
        currentAttemptId: row.current_attempt_id,
        queueOrder: toInt(row.queue_order),
        nextAttemptAt: toMsOrNull(row.next_attempt_at),
        events: toInt(row.event_seq),
      }))
      .sort(byKey((x) => x.id)),
    m.runs.map((x) => ({ ...x })).sort(byKey((x) => x.id)),
  );
  expectSame(
    rows.attempts
      .map((a) => ({
        id: a.id,
        runId: a.run_id,
        attemptNo: toInt(a.attempt_no),
        status: a.status,
        leaseGeneration: toInt(a.lease_generation),
      }))
      .sort(byKey((x) => x.id)),
    [...m.attempts.values()].map((a) => ({ ...a })).sort(byKey((x) => x.id)),
  );
  expectSame(
    leases
      .map((l) => ({
        offerId: l.offer_id,
        attemptId: l.attempt_id,
        generation: l.lease_generation,
        workerId: l.worker_id,
        sessionId: l.session_id,
        version: l.version,
        state: l.state,
        expiresAt: l.expires_at,
      }))
      .sort(byKey((x) => x.offerId)),
    m.leases
      .map((l) => ({
        offerId: l.offerId,
        attemptId: l.attemptId,
        generation: l.generation,
        workerId: m.workers[l.workerIdx]!.workerId,
        sessionId: l.sessionId,
        version: l.version,
        state: l.state,
        expiresAt: l.expiresAt,
      }))
      .sort(byKey((x) => x.offerId)),
  );
}

const worker = fc.nat({ max: WORKERS - 1 });
const leaseIndex = fc.nat({ max: 63 });
const leaseRef = fc
  .tuple(leaseIndex, fc.oneof({ weight: 3, arbitrary: fc.constant(true) }, fc.constant(false)))
  .map(([index, live]): LeaseRef => ({ index, live }));
const via = fc.constantFrom<'own' | 'current'>('own', 'own', 'current');
const fault = fc.constantFrom<Fault>('none', 'none', 'none', 'wrongToken', 'lostRenewal', 'oldVersion');
const rarely = fc.oneof(
  { weight: 5, arbitrary: fc.constant(false) },
  { weight: 1, arbitrary: fc.constant(true) },
);
const workerRef = fc
  .tuple(worker, fc.oneof({ weight: 3, arbitrary: fc.constant(true) }, fc.constant(false)))
  .map(([index, prefer]): WorkerRef => ({ index, prefer }));
const pull = fc.tuple(workerRef, rarely).map(([w, old]) => new Pull(w, old));
const advance = fc
  .tuple(
    fc.oneof(fc.integer({ min: 1, max: 40_000 }), fc.constantFrom(1, 1_000, RUN_LEASE - 1, RUN_LEASE)),
    fc.boolean(),
  )
  .map(([ms, s]) => new Advance(ms, s));

/** The command mix, weighted so that runs get deep enough to use up their retry policy. */
const LEASE_COMMANDS = (
  [
    [4, pull],
    [
      1,
      fc
        .tuple(leaseRef, fc.constantFrom<Via>('own', 'own', 'current', 'other'), rarely)
        .map(([l, v, t]) => new Replay(l, v, t)),
    ],
    [3, fc.tuple(leaseRef, via, fault).map(([l, v, x]) => new Renew(l, v, x))],
    [1, fc.tuple(leaseRef, via, fault).map(([l, v, x]) => new Release(l, v, x))],
    [3, leaseIndex.map((i) => new Start(i))],
    [3, advance],
    [1, fc.constant(new Sweep())],
    [3, worker.map((w) => new Heartbeat(w))],
    [1, workerRef.map((w) => new ReplaceSession(w))],
  ] as const
).flatMap(([n, arbitrary]) => Array.from({ length: n }, (): fc.Arbitrary<ModelCommand> => arbitrary));

const NUM_RUNS = Number(process.env.QL_LEASE_MODEL_RUNS ?? 40);
const MAX_COMMANDS = Number(process.env.QL_LEASE_MODEL_COMMANDS ?? 120);

/** Re-run one failure: QL_LEASE_MODEL_SEED=<seed> QL_LEASE_MODEL_PATH=<path> (both printed by fast-check). */
function replayParameters(): fc.Parameters<unknown> {
  const seed = process.env.QL_LEASE_MODEL_SEED;
  const path = process.env.QL_LEASE_MODEL_PATH;
  return {
    ...(seed ? { seed: Number(seed) } : {}),
    ...(path ? { path, endOnFailure: true } : {}),
  };
}

export function describeLeaseModel(dialect: string, makeTarget: () => DispatchTarget): void {
  describe(`dispatch leases command model (${dialect})`, () => {
    let target: DispatchTarget;
    let f: DispatchFixture;
    let taskId: string;
    let policy: RetryPolicy;
    let round = 0;

    beforeAll(async () => {
      target = makeTarget();
      f = new DispatchFixture(await target.open());
      const task = await f.task({ retry: RETRY });
      taskId = task.id;
      policy = task.spec.retry!;
    });
    afterAll(async () => {
      if (process.env.QL_LEASE_MODEL_STATS)
        console.log(`${dialect}: ${JSON.stringify(Object.fromEntries([...stats].sort()), null, 1)}`);
      await target.dispose();
    });

    /** A clean queue, 3 fresh workers (capacity 2, short session lease), 6 queued runs with a retry policy. */
    async function setup(): Promise<{ model: Model; real: Real }> {
      for (const table of ['run_events', 'run_leases', 'attempts', 'runs'])
        await f.db.run(`DELETE FROM ${table}`);
      round++;
      count('#runs');
      const now = target.clock.now();
      const workers: WorkerModel[] = [];
      for (let i = 0; i < WORKERS; i++) {
        const workerId = `model-${dialect}-${round}-${i}`;
        const { session } = await f.sessions.register({
          workerId,
          sessionId: newSessionId(),
          snapshot: snapshot({ maxConcurrentRuns: CAPACITY, availableSlots: CAPACITY }),
          leaseMs: SESSION_MS,
        });
        workers.push({
          workerId,
          current: {
            workerIdx: i,
            sessionId: session.sessionId,
            fence: { generation: session.generation, expectedVersion: session.version },
            expiresAt: session.leaseExpiresAt,
          },
          old: [],
        });
      }
      const runs = (await f.queue(taskId, RUNS)).map((q): RunModel => ({
        id: q.id,
        status: 'queued',
        attemptCount: 0,
        currentAttemptId: null,
        queueOrder: now,
        nextAttemptAt: null,
        events: 1,
      }));
      return {
        model: { now, workers, leases: [], attempts: new Map(), runs },
        real: { f, clock: target.clock, policy, versions: new Map(), generations: new Map() },
      };
    }

    it(`${NUM_RUNS} runs of up to ${MAX_COMMANDS} commands keep every lease and run invariant`, async () => {
      expect(policy).toMatchObject(RETRY);
      await fc.assert(
        fc.asyncProperty(
          fc.commands(LEASE_COMMANDS, {
            maxCommands: MAX_COMMANDS,
            size: 'max',
            ...(process.env.QL_LEASE_MODEL_REPLAY ? { replayPath: process.env.QL_LEASE_MODEL_REPLAY } : {}),
          }),
          (commands) => fc.asyncModelRun(setup, commands),
        ),
        { numRuns: NUM_RUNS, ...replayParameters() },
      );
    }, 180_000);

    it('example: every run uses up its retry policy (3 started attempts lost) and ends lost, via the sweeper only', async () => {
      const w = (index: number): WorkerRef => ({ index, prefer: false });
      const cycle = (backoffMs: number): ModelCommand[] => [
        ...[0, 0, 1, 1, 2, 2].map((i) => new Pull(w(i), false)),
        ...[0, 1, 2, 3, 4, 5].map((i) => new Start(i)),
        new Advance(RUN_LEASE - 1, true),
        new Advance(1, true),
        new Advance(backoffMs, true),
        ...[0, 1, 2].map((i) => new Heartbeat(i)),
      ];
      await fc.asyncModelRun(setup, [...cycle(1_000), ...cycle(2_000), ...cycle(0)]);
      expect(await f.count('runs', `status = 'lost'`)).toBe(RUNS);
      expect(await f.count('attempts', `status = 'lost'`)).toBe(RUNS * RETRY.maxAttempts);
    });

    /** Regression: what the model found, pinned as examples. */
    async function emptyQueue(): Promise<void> {
      for (const table of ['run_events', 'run_leases', 'attempts', 'runs'])
        await f.db.run(`DELETE FROM ${table}`);
    }

    it('regression: renew and findLease return the lease without its token digest', async () => {
      await emptyQueue();
      await f.queue(taskId, 1);
      const worker = await f.worker(`digest-${dialect}`, CAPACITY);
      const token = newToken();
      const offer = offered(await f.pull(worker, f.ids.uuidV7(), token));
      const renewed = await f.leases.renew(f.leaseCommand(worker, offer, token));
      const found = await f.leases.findLease(offer.lease.offerId);
      for (const lease of [renewed.lease, found])
        expect(JSON.stringify(lease)).not.toContain(leaseTokenDigest(token));
      expect(renewed.lease).toEqual({ ...offer.lease, version: 1 });
      expect(found).toEqual(renewed.lease);
    });

    it('regression: a replay is answered from the durable lease even when nothing is left to claim', async () => {
      await emptyQueue();
      await f.queue(taskId, 1);
      const a = await f.worker(`replay-a-${dialect}`, CAPACITY);
      const b = await f.worker(`replay-b-${dialect}`, CAPACITY);
      const offerId = f.ids.uuidV7();
      const token = newToken();
      const first = offered(await f.pull(a, offerId, token));
      const writes = async () => [await f.count('run_events'), await f.count('run_leases')];
      const before = await writes();
      // The queue is empty and `a` has a free slot: still the same offer, or the fence that names why not.
      expect(await f.pull(a, offerId, token)).toEqual({ kind: 'offered', replayed: true, offer: first });
      await expectFence(f.pull(a, offerId, newToken()), 'lease', 'offer_conflict');
      await expectFence(f.pull(b, offerId, token), 'lease', 'offer_conflict');
      expect(await writes()).toEqual(before);
      await f.leases.release(f.leaseCommand(a, first, token));
      offered(await f.pull(b));
      await expectFence(f.pull(a, offerId, token), 'lease', 'lease_not_active');
    });
  });
}
