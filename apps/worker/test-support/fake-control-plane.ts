import type { IncomingMessage } from 'node:http';
import type { Readable } from 'node:stream';
import { monotonicNow } from '../src/host/monotonic';
import {
  EXECUTION_OFFER_SCHEMA,
  IngressAction,
  buildActivationResponse,
  createIdGenerator,
} from '@ql/contracts';
import { TaskSpec, parseTaskSpec } from '@ql/domain';
import { IngressCallError, IngressCallOptions } from '../src/ingress-client/worker-ingress-https.client';
import type { WorkerIngress } from '../src/lifecycle/worker-lifecycle.service';

export interface Call {
  readonly action: IngressAction;
  readonly sessionId: string;
  readonly body: Record<string, unknown>;
  readonly at: number;
}
/** Overrides one answer; `plane.accept(call)` gives the normal one (e.g. to lose an answer after committing). */
export type Reply = (call: Call, plane: FakeControlPlane) => unknown;

export interface FakeLease {
  readonly offerId: string;
  readonly token: string;
  readonly runId: string;
  readonly attemptId: string;
  readonly spec: ReturnType<typeof parseTaskSpec>;
  version: number;
  expiresAt: number;
  state: 'active' | 'ended';
  attempt: 'claimed' | 'starting' | 'running' | 'succeeded' | 'failed' | 'timed_out' | 'cancelled';
  callbacks: number;
  cancelRequested: boolean;
  readonly logs: { seq: number; stream: unknown; text: string }[];
  completion?: Record<string, unknown>;
  startFailure?: string;
  /** The handle `running` or a completion standing in for it carried (ADR 0047). */
  executorHandle?: string;
}

const ids = createIdGenerator();

/**
 * The control plane in memory, for the worker's orchestration tests: the session fence (every session
 * call bumps the version; every call must carry the current one), a queue of task specs, leases with
 * token, generation, version and term, the activation steps, in-order logs, cancel intents. Answers go
 * through the same contract builders the real one uses.
 */
export class FakeControlPlane implements WorkerIngress {
  readonly calls: Call[] = [];
  readonly queue: Partial<TaskSpec>[] = [];
  readonly leases = new Map<string, FakeLease>();
  reply: Partial<Record<IngressAction, Reply>> = {};
  version = 0;
  status: 'online' | 'draining' | 'offline' = 'online';
  inflight = 0;
  maxInflight = 0;
  /** Whether heartbeat answers name the cancel intents (the renew answer always carries its own). */
  heartbeatCancels = true;

  /** The fake's clock minus the worker's: lease expiries are written in the control plane's time. */
  clockSkewMs = 0;

  constructor(private readonly leaseMs = 10_000) {}

  /** The control plane's clock. */
  now(): number {
    return Date.now() + this.clockSkewMs;
  }

  /** What the HTTPS client does with the answers' `Date` header: server time onto the worker's monotonic clock. */
  toLocalTime(serverMs: number): number {
    return serverMs - this.clockSkewMs - (Date.now() - monotonicNow());
  }

  /** Queues a run of a task with this spec (defaults fill the rest). */
  enqueue(spec: Partial<TaskSpec>): void {
    this.queue.push(spec);
    for (const wake of [...this.held]) wake();
  }

  /** Long-poll pulls held right now (ADR 0019). */
  readonly held = new Set<() => void>();

  /** As the control plane holds an `offers` call with `waitMs` while nothing is queued. */
  private async hold(call: Call, signal: AbortSignal | undefined): Promise<void> {
    const waitMs = Number(call.body.waitMs ?? 0);
    if (!(waitMs > 0) || this.queue.length > 0 || this.status !== 'online') return;
    await new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', done);
        this.held.delete(done);
        resolve();
      };
      const timer = setTimeout(done, waitMs);
      signal?.addEventListener('abort', done, { once: true });
      this.held.add(done);
    });
    if (signal?.aborted) throw new IngressCallError(call.action, 0, 'aborted', 'aborted');
  }

  /** A lease the control plane holds for a journal record of a previous process (restart tests). */
  adopt(r: { offerId: string; leaseToken: string | null; runId: string; attemptId: string }): FakeLease {
    const lease = this.lease(r.offerId, r.leaseToken ?? '', {}, r);
    lease.attempt = 'running';
    lease.callbacks = 2;
    return lease;
  }

  of(action: IngressAction): Call[] {
    return this.calls.filter((c) => c.action === action);
  }

  get leaseList(): FakeLease[] {
    return [...this.leases.values()];
  }

  async call<A extends IngressAction>(
    action: A,
    sessionId: string,
    body: unknown,
    options: IngressCallOptions = {},
  ): Promise<never> {
    const call: Call = { action, sessionId, body: body as Record<string, unknown>, at: Date.now() };
    this.calls.push(call);
    this.inflight++;
    this.maxInflight = Math.max(this.maxInflight, this.inflight);
    try {
      if (options.signal?.aborted) throw new IngressCallError(action, 0, 'aborted', 'aborted');
      await new Promise((resolve) => setImmediate(resolve)); // an answer is never synchronous
      if (action === 'offers') await this.hold(call, options.signal);
      const override = this.reply[action];
      const answer = override ? override(call, this) : this.accept(call);
      if (!options.parse) return answer as never;
      try {
        return options.parse(Buffer.from(JSON.stringify(answer))) as never; // as the HTTPS client does
      } catch (error) {
        throw new IngressCallError(action, 200, 'invalid_response', String(error));
      }
    } finally {
      this.inflight--;
    }
  }

  /** ADR 0051: the bytes a bundle fetch answers with (a test sets it); absent: 404, as for no bundle. */
  serveBundle?: (call: Call, signal: AbortSignal | undefined) => Readable;

  /** The `bundle` call: the lease fence as the real one checks it, then what `serveBundle` streams. */
  async download(
    sessionId: string,
    body: unknown,
    options: { readonly signal?: AbortSignal; readonly maxBytes: number },
  ): Promise<IncomingMessage> {
    const call: Call = { action: 'bundle', sessionId, body: body as Record<string, unknown>, at: Date.now() };
    this.calls.push(call);
    await new Promise((resolve) => setImmediate(resolve));
    const l = this.leases.get(call.body.offerId as string);
    if (!l || l.token !== call.body.leaseToken || l.state !== 'active')
      throw new IngressCallError('bundle', 409, 'worker_lease_fenced', 'lease fenced', 'lease_not_active');
    if (!this.serveBundle) throw new IngressCallError('bundle', 404, 'worker_route_not_found', 'no bundle');
    // As the control plane (issue 27 item 7): a bundle only for an attempt that reported `starting`.
    if (l.attempt !== 'starting') throw fenced('lease', 'attempt_not_starting');
    const stream = this.serveBundle(call, options.signal);
    // As the HTTPS client does: the caller's abort ends the answer.
    options.signal?.addEventListener('abort', () => stream.destroy(new Error('aborted')), { once: true });
    return stream as IncomingMessage;
  }

  async close(): Promise<void> {}

  /** The normal answer to a call. */
  accept(call: Call): unknown {
    const b = call.body;
    if (call.action === 'register') return this.session(call, { outcome: 'created' });
    // A held pull is served while the worker's own later calls moved the version on (ADR 0019).
    const behind =
      call.action === 'offers' && Number(b.waitMs ?? 0) > 0 && Number(b.expectedVersion) < this.version;
    if (b.expectedVersion !== this.version && !behind) throw fenced('session', 'version_mismatch');
    switch (call.action) {
      case 'heartbeat':
      case 'drain':
      case 'offline':
        this.version++;
        if (call.action !== 'heartbeat') this.status = call.action === 'drain' ? 'draining' : 'offline';
        return this.session(
          call,
          call.action === 'heartbeat'
            ? {
                cancelAttemptIds: this.heartbeatCancels
                  ? this.leaseList
                      .filter((l) => l.state === 'active' && l.cancelRequested)
                      .map((l) => l.attemptId)
                  : [],
              }
            : {},
        );
      case 'offers':
        return this.offers(b);
      default:
        return this.leaseStep(call.action, b);
    }
  }

  private session(call: Call, extra: Record<string, unknown>) {
    return {
      workerId: 'worker-a',
      sessionId: call.sessionId,
      generation: 1,
      version: this.version,
      status: this.status,
      leaseExpiresAt: new Date(this.now() + 30_000).toISOString(),
      maxConcurrentRuns: 4,
      availableSlots: 4,
      ...extra,
    };
  }

  private offers(b: Record<string, unknown>) {
    const known = this.leases.get(b.offerId as string);
    if (known) {
      if (known.token !== b.leaseToken) throw fenced('lease', 'offer_conflict');
      return this.offerAnswer(known); // the replay of a lost answer
    }
    const next = this.queue.shift();
    if (!next || this.status !== 'online') {
      return {
        schema: EXECUTION_OFFER_SCHEMA,
        status: 'idle',
        idle: { reason: 'no_queued_runs', activeLeases: 0, capacity: 4, scanned: 0 },
      };
    }
    return this.offerAnswer(this.lease(b.offerId as string, b.leaseToken as string, next));
  }

  private lease(
    offerId: string,
    token: string,
    spec: Partial<TaskSpec>,
    run = { runId: ids.uuidV7(), attemptId: ids.uuidV7() },
  ): FakeLease {
    const lease: FakeLease = {
      offerId,
      token,
      runId: run.runId,
      attemptId: run.attemptId,
      spec: parseTaskSpec({ name: 'task', command: 'true', runtime: 'shell', ...spec }),
      version: 0,
      expiresAt: this.now() + this.leaseMs,
      state: 'active',
      attempt: 'claimed',
      callbacks: 0,
      cancelRequested: false,
      logs: [],
    };
    this.leases.set(offerId, lease);
    return lease;
  }

  private offerAnswer(l: FakeLease) {
    return {
      schema: EXECUTION_OFFER_SCHEMA,
      status: 'offered',
      run: { runId: l.runId, taskId: l.runId, revision: 1, attemptId: l.attemptId, attemptNo: 1 },
      execution: { digest: l.spec.digest, spec: l.spec.spec },
      lease: this.projection(l),
    };
  }

  private projection(l: FakeLease) {
    return {
      offerId: l.offerId,
      sessionGeneration: 1,
      leaseGeneration: 1,
      version: l.version,
      expiresAt: new Date(l.expiresAt).toISOString(),
    };
  }

  /** The lease fence as the real one checks it, then the step. */
  private leaseStep(action: IngressAction, b: Record<string, unknown>): unknown {
    const l = this.leases.get(b.offerId as string);
    if (!l || l.token !== b.leaseToken) throw fenced('lease', l ? 'lease_token_mismatch' : 'lease_not_found');
    if (b.leaseGeneration !== 1) throw fenced('lease', 'lease_generation_mismatch');
    if (l.state !== 'active') throw fenced('lease', 'lease_not_active');
    if (l.expiresAt <= this.now()) throw fenced('lease', 'lease_expired');
    if (b.leaseVersion !== l.version && b.leaseVersion !== l.version - 1)
      throw fenced('lease', 'lease_version_mismatch');
    switch (action) {
      case 'renew':
        l.version++;
        l.expiresAt = this.now() + this.leaseMs;
        return { lease: this.projection(l), cancelRequested: l.cancelRequested };
      case 'release':
        l.state = 'ended';
        return { lease: this.projection(l) };
      case 'logs':
        this.appendLogs(l, [b]);
        return { outcome: 'stored', truncated: false };
      case 'starting':
        return this.step(l, 'starting');
      case 'running':
        if (l.attempt !== 'starting') throw fenced('lease', 'attempt_not_starting');
        l.executorHandle = b.executorHandle as string;
        return this.step(l, 'running');
      case 'start-failure':
        l.startFailure = b.errorCode as string;
        l.state = 'ended';
        return this.step(l, 'failed');
      case 'completion':
        // With the handle, a starting attempt too: the completion stands in for `running` (ADR 0047).
        if (l.attempt === 'starting' && typeof b.executorHandle === 'string') {
          l.executorHandle = b.executorHandle;
          l.callbacks++;
        } else if (l.attempt !== 'running') throw fenced('lease', 'attempt_not_running');
        // Its last output first, as the logs route would take it (ADR 0044); a gap refuses it all.
        this.appendLogs(l, (b.finalLogs as Record<string, unknown>[] | undefined) ?? []);
        l.completion = { outcome: b.outcome, exitCode: b.exitCode, errorSummary: b.errorSummary };
        l.state = 'ended';
        return this.step(l, b.outcome as FakeLease['attempt']);
      default:
        throw new Error(`fake control plane: no ${action}`);
    }
  }

  /** Chunks in sequence from the next seq, or none of them (`log_sequence_gap`). */
  private appendLogs(l: FakeLease, chunks: Record<string, unknown>[]): void {
    if (chunks.some((c, i) => c.seq !== l.logs.length + i)) throw fenced('lease', 'log_sequence_gap');
    for (const c of chunks) l.logs.push({ seq: c.seq as number, stream: c.stream, text: c.text as string });
  }

  private step(l: FakeLease, attempt: FakeLease['attempt']) {
    l.attempt = attempt;
    l.callbacks++;
    const terminal = !['claimed', 'starting', 'running'].includes(attempt);
    return buildActivationResponse('applied', {
      runId: l.runId,
      attemptId: l.attemptId,
      runStatus: terminal ? (attempt as 'failed') : attempt === 'running' ? 'running' : 'dispatching',
      attemptStatus: attempt,
      leaseVersion: l.version,
      leaseGeneration: 1,
      callbackSequence: l.callbacks,
    });
  }
}

export function fenced(area: 'session' | 'lease', reason: string): IngressCallError {
  return new IngressCallError('fake', 409, `worker_${area}_fenced`, `${area} fenced`, reason);
}

/** A call that never got its answer back (the connection dropped). */
export function lostAnswer(): IngressCallError {
  return new IngressCallError('fake', 0, 'transport_error', 'transport failed: ECONNRESET', 'ECONNRESET');
}

/** 429 `worker_rate_limited` with `Retry-After` as the HTTPS client reads it (ADR 0042). */
export function rateLimited(retryAfterMs: number): IngressCallError {
  return new IngressCallError(
    'fake',
    429,
    'worker_rate_limited',
    'too many requests',
    undefined,
    retryAfterMs,
  );
}
