// Size: the worker's one serialized call chain (register, heartbeat loop, drain, offline, fenced, stop
// budget) and the strict readers of its answers; every ingress call of the worker goes through it.
import type { IncomingMessage } from 'node:http';
import { Inject, Injectable, OnModuleDestroy, Optional } from '@nestjs/common';
import { SchedulerRegistry } from '@nestjs/schedule';
import { ScheduledLoop } from '@ql/scheduling';
import {
  ContractError,
  HeartbeatResponse,
  IngressAction,
  LeaseCallFields,
  RegisterResponse,
  SessionFenceRequest,
  SessionResponse,
  buildBundleRequest,
  buildDrainRequest,
  buildHeartbeatRequest,
  buildLeaseCallRequest,
  buildOfflineRequest,
  buildRegisterRequest,
  parseAnySessionAnswer,
  CURRENT_WIRE_VERSION,
  WireVersion,
  wireVersionOf,
} from '@ql/contracts';
import { ID_GENERATOR, IdGenerator, IllegalStateError } from '@ql/domain';
import { HostProbe, detectCapabilities } from '../config/capabilities';
import type { WorkerConfig } from '../config/worker-config';
import {
  IngressCallError,
  IngressCallOptions,
  IngressResponse,
} from '../ingress-client/worker-ingress-https.client';
import { WORKER_LOG, WorkerLog } from '../logging/worker-log';
import {
  LeaseAction,
  LeaseCallOptions,
  LeaseChannel,
  describeError,
  isCertificateRevoked,
  isRateLimited,
  isRetryable,
  isSessionFenced,
  pause,
  startRetryPauseMs,
} from '../runs/lease-channel';
import { RateLimitLog } from '../logging/rate-limit-log';
import { RepeatedFailureLog } from '../logging/repeated-failure';
import type { WorkerRuns } from '../runs/run-supervisor';
import { WORKER_STOP_FAILED } from '../runs/attempt-outcome';
import { linkedSignal } from './linked-signal';
import {
  HOST_PROBE,
  WORKER_CERTIFICATE,
  WORKER_CONFIG,
  WORKER_INGRESS_CLIENT,
  WORKER_PROTOCOL_MIN,
  WORKER_PROTOCOL_VERSION,
  WORKER_RUNS,
  WORKER_SOFTWARE_VERSION,
} from '../worker.tokens';

/** The first pause before register is sent again; each next one twice as long, at most the max. */
export const REGISTER_RETRY_FIRST_MS = 500;
export const REGISTER_RETRY_MAX_MS = 10_000;

/** `start()` ended by `cancelStart()` (a stop signal while registering): nothing to report, exit 0. */
export class StartCancelled extends Error {
  constructor() {
    super('the worker was stopped before it registered');
    this.name = 'StartCancelled';
  }
}

/**
 * ADR 0060: the control plane serves none of the protocol versions this worker speaks (every one from
 * `QL_WORKER_PROTOCOL_MAX` down was refused): the worker exits `protocolUnsupported` (15), which no
 * shipped supervisor restarts. The message names both sides.
 */
export class ProtocolUnsupported extends Error {
  override readonly name = 'ProtocolUnsupported';
  constructor(
    readonly speaks: string,
    readonly answer: string,
  ) {
    super(
      `the control plane serves none of the protocol versions this worker speaks (${speaks}); its last answer: ${answer}`,
    );
  }
}

/**
 * A register refused for its `protocolVersion`: 400 `protocol_unsupported` from a control plane that
 * negotiates, or 400 `invalid_worker_request` `protocolVersion: unsupported` from one that accepts only 3
 * (the first release): then the worker registers again with the next lower version (ADR 0060 §1).
 */
export function isProtocolRefusal(error: unknown): error is IngressCallError {
  if (!(error instanceof IngressCallError) || error.status !== 400) return false;
  return (
    error.code === 'protocol_unsupported' ||
    (error.code === 'invalid_worker_request' && error.message.endsWith('protocolVersion: unsupported'))
  );
}

/** The slice of the certificate keeper the lifecycle drives (ADR 0045). */
export interface WorkerCertificate {
  prepare(signal: AbortSignal): Promise<void>;
  startRenewing(): void;
  stop(): void;
}

/** The slice of the HTTPS client the lifecycle needs (a fake in unit tests). */
export interface WorkerIngress {
  call<A extends IngressAction>(
    action: A,
    sessionId: string,
    body: unknown,
    options?: IngressCallOptions,
  ): Promise<IngressResponse<A>>;
  close(): Promise<void>;
  /** A control-plane (database) time, such as a lease expiry, on this machine's clock. */
  toLocalTime(serverMs: number): number;
  /** ADR 0060: the wire version of the session it registered; a v1 session's answers are read as v1. */
  speak?(version: WireVersion): void;
  /** ADR 0051: the streamed `bundle` answer (absent in fakes that serve no bundles). */
  download?(
    sessionId: string,
    body: unknown,
    options: { readonly signal?: AbortSignal; readonly maxBytes: number },
  ): Promise<IncomingMessage>;
}

export const WORKER_STATES = [
  'idle',
  'starting',
  'online',
  'stopping',
  'stopped',
  'fenced',
  'failed',
] as const;
export type WorkerState = (typeof WORKER_STATES)[number];

/** Why the worker must end: the control plane fenced its session (R-WRK-6). */
export interface WorkerFenced {
  readonly action: string;
  readonly code: string;
  readonly reason?: string;
}

/** `stop()` failed or ran out of budget; the message says which phase. */
export class WorkerStopError extends Error {
  override readonly name = 'WorkerStopError';
  constructor(
    readonly phase: 'drain' | 'local-runs' | 'offline',
    message: string,
  ) {
    super(message);
  }
}

class StopBudgetExceeded extends Error {}

/** Kept at the end of the stop budget for the killed runs' completions and offline (ADR 0011). */
export const STOP_REPORT_ROOM_MS = 1500;

/**
 * When a stop gives up waiting for the runs still going, and their SIGTERM → SIGKILL grace then, so
 * that the kill and the completion reports fit in the budget while their leases are live (issue 29
 * item 4): the last min(grace + 1.5 s, half the budget) of it, of which up to 1.5 s (at most half of
 * it) stays for the reports and offline; the grace gives way where that is short, never the room.
 */
export function stopCancelPlan(
  budgetMs: number,
  killGraceMs: number,
): { cancelAtMs: number; graceMs: number } {
  const tail = Math.min(killGraceMs + STOP_REPORT_ROOM_MS, Math.floor(budgetMs / 2));
  const room = Math.min(STOP_REPORT_ROOM_MS, Math.floor(tail / 2));
  return { cancelAtMs: budgetMs - tail, graceMs: Math.max(0, Math.min(killGraceMs, tail - room)) };
}

interface SessionState {
  readonly sessionId: string;
  readonly generation: number;
  version: number;
  status: SessionResponse['status'];
}

/**
 * The headless worker's session lifecycle (R-WRK-1, -5, -6): take the journal, register a fresh
 * session, heartbeat on one non-overlapping unref'd timer, handle the journal's records, then let the
 * runs pull; drain, wait for local runs, then offline on stop; end for good when fenced. Every
 * ingress call — session and lease calls alike — goes through one serialized chain, because each
 * carries the session's expected version. The constructor and module init do nothing; everything
 * starts in `start()` (R-PROF-3).
 */
@Injectable()
export class WorkerLifecycleService implements OnModuleDestroy, LeaseChannel {
  private state: WorkerState = 'idle';
  private session: SessionState | undefined;
  /** ADR 0060: the protocol version the session registered with; 0 until it did. */
  private negotiated = 0;
  /** The one heartbeat loop, made by `start()` (R-PROF-3: nothing is scheduled before). */
  private heartbeatLoop: ScheduledLoop | undefined;
  private heartbeats = false;
  /** `heartbeat failed`, then summaries with growing spacing, then `heartbeat recovered` (issue 16). */
  private readonly heartbeatFailures: RepeatedFailureLog;
  /** One warning per burst of 429s across every call of the worker (ADR 0042). */
  private readonly rateLimits: RateLimitLog;
  /** Session calls carry an expected version, so they run strictly one after another. */
  private chain: Promise<unknown> = Promise.resolve();
  /** Aborts whatever call is in flight: on fence, stop budget or module destroy. */
  private readonly abort = new AbortController();
  private readonly fencedSignal: Promise<WorkerFenced>;
  private announceFenced!: (event: WorkerFenced) => void;

  constructor(
    @Inject(WORKER_CONFIG) private readonly config: WorkerConfig,
    @Inject(WORKER_INGRESS_CLIENT) private readonly ingress: WorkerIngress,
    @Inject(ID_GENERATOR) private readonly ids: IdGenerator,
    @Inject(WORKER_LOG) private readonly log: WorkerLog,
    @Inject(HOST_PROBE) private readonly probe: HostProbe,
    /** Present only in the `worker` profile's module graph (`WorkerModule.forProfile('worker')`). */
    @Optional() private readonly scheduler?: SchedulerRegistry,
    /** The runs to drive; without them the worker only keeps its session. */
    @Optional() @Inject(WORKER_RUNS) private readonly runs?: WorkerRuns,
    /** Enrollment and rotation (ADR 0045); without it the worker uses its files as they are. */
    @Optional() @Inject(WORKER_CERTIFICATE) private readonly certificate?: WorkerCertificate,
  ) {
    this.fencedSignal = new Promise((resolve) => (this.announceFenced = resolve));
    this.heartbeatFailures = new RepeatedFailureLog(log, 'heartbeat');
    this.rateLimits = new RateLimitLog(log);
  }

  get currentState(): WorkerState {
    return this.state;
  }

  /** The session as last acknowledged by the control plane. */
  get currentSession(): Readonly<SessionState> | undefined {
    return this.session && { ...this.session };
  }

  /** Resolves once if the control plane fences this session; the owner decides how to exit. */
  whenFenced(): Promise<WorkerFenced> {
    return this.fencedSignal;
  }

  async start(): Promise<RegisterResponse> {
    if (!this.scheduler)
      throw new IllegalStateError('the worker starts only in the worker profile (QL_PROFILE=worker)');
    this.transition(['idle'], 'starting');
    try {
      const capabilities = await detectCapabilities(this.config.labels, this.probe);
      // Checked by the control plane's own rules as it is built, so a local mistake fails here, clearly.
      const bodyFor = (protocolVersion: number) =>
        buildRegisterRequest({
          capabilities: capabilities.capabilities,
          maxConcurrentRuns: this.config.maxConcurrentRuns,
          availableSlots: this.config.maxConcurrentRuns,
          softwareVersion: WORKER_SOFTWARE_VERSION,
          protocolVersion,
        });
      const highest = this.config.protocolMax ?? WORKER_PROTOCOL_VERSION;
      bodyFor(highest);
      await this.runs?.open(); // single ownership of the journal before any session exists (R-WRK-1)
      // ADR 0045 §4: enroll, or renew (a new key), before every register.
      await this.certificate?.prepare(this.abort.signal);
      if (this.abort.signal.aborted) throw new StartCancelled();
      const { sessionId, res } = await this.negotiate(highest, bodyFor);
      const session = readSessionResponse(res, this.config.workerId, sessionId);
      this.session = {
        sessionId,
        generation: session.generation,
        version: session.version,
        status: session.status,
      };
      this.state = 'online';
      this.log.info('worker registered', {
        workerId: this.config.workerId,
        sessionId,
        generation: session.generation,
        version: session.version,
        outcome: res.outcome,
        architecture: capabilities.capabilities.architecture,
        operatingSystem: capabilities.capabilities.operatingSystem,
        runtimes: capabilities.capabilities.runtimes.map((r) => `${r.name}@${r.version}`),
        labelCount: Object.keys(capabilities.capabilities.labels).length,
        capabilitiesDigest: capabilities.digest,
        maxConcurrentRuns: this.config.maxConcurrentRuns,
        protocolVersion: this.negotiated,
      });
      this.heartbeats = true;
      this.armHeartbeat();
      this.certificate?.startRenewing();
      await this.startRuns();
      return res;
    } catch (error) {
      if (this.state !== 'fenced') this.state = 'failed';
      this.stopHeartbeats();
      this.certificate?.stop();
      await this.runs?.close();
      await this.ingress.close();
      throw error;
    }
  }

  /**
   * ADR 0060 §1: register with the highest protocol version this worker may speak; refused for it (a
   * control plane that does not serve it), register again with the next lower one, each with a new
   * session id (nothing was written for a refused one), down to WORKER_PROTOCOL_MIN; none served ends
   * the start with ProtocolUnsupported. The version registered is the session's (`negotiated`).
   */
  private async negotiate(
    highest: number,
    bodyFor: (protocolVersion: number) => unknown,
  ): Promise<{ sessionId: string; res: IngressResponse<'register'> }> {
    for (let version = highest; ; version--) {
      const sessionId = this.ids.uuidV7();
      try {
        const res = await this.register(sessionId, bodyFor(version));
        this.negotiated = version;
        this.ingress.speak?.(wireVersionOf(version) ?? 1);
        return { sessionId, res };
      } catch (error) {
        if (!isProtocolRefusal(error)) throw error;
        const lower = version - 1;
        if (lower < WORKER_PROTOCOL_MIN)
          throw new ProtocolUnsupported(`${WORKER_PROTOCOL_MIN}..${highest}`, error.message);
        this.log.warn('register refused this protocol version; registering again with the next lower one', {
          workerId: this.config.workerId,
          protocolVersion: version,
          next: lower,
          code: error.code,
        });
      }
    }
  }

  /** ADR 0060: the protocol version this worker's session registered with (0 before it registered). */
  get protocolVersion(): number {
    return this.negotiated;
  }

  /**
   * Register, sent again while no answer comes — the control plane starting, unreachable, slow or
   * busy (no answer, 429, 5xx) — with the same session id, which the control plane answers as a replay
   * if an earlier try committed; a pause of 0.5 s doubling up to 10 s between tries (longer if the
   * answer's `Retry-After` says so), logged once per outage (a 429 is the rate-limit burst's line). A
   * refusal (any other answer) or missing credentials end the start; `cancelStart()` too.
   */
  private async register(sessionId: string, body: unknown): Promise<IngressResponse<'register'>> {
    const failures = new RepeatedFailureLog(this.log, 'register');
    for (let pauseMs = REGISTER_RETRY_FIRST_MS; ; pauseMs = Math.min(pauseMs * 2, REGISTER_RETRY_MAX_MS)) {
      try {
        const res = await this.send('register', sessionId, body, { signal: this.abort.signal });
        failures.succeeded({ workerId: this.config.workerId });
        return res;
      } catch (error) {
        const answerless =
          isRetryable(error) && (error as IngressCallError).code !== 'credentials_unavailable';
        if (!answerless || this.abort.signal.aborted) throw error;
        const waitMs = startRetryPauseMs(error, pauseMs);
        if (!isRateLimited(error))
          failures.failed({ workerId: this.config.workerId, retryInMs: waitMs, ...describeError(error) });
        await pause(waitMs, this.abort.signal);
        if (this.abort.signal.aborted) throw new StartCancelled();
      }
    }
  }

  /** Whether `start()` failed because `cancelStart()` stopped it. */
  get startCancelled(): boolean {
    return this.abort.signal.reason instanceof StartCancelled;
  }

  /** A stop asked for while the worker is still starting (registering): `start()` rejects. */
  cancelStart(): void {
    if (this.state === 'starting' && !this.abort.signal.aborted) this.abort.abort(new StartCancelled());
  }

  /** The journal's records first (leftover groups killed, reports sent), then pulling (R-WRK-1). */
  private async startRuns(): Promise<void> {
    if (!this.runs) return;
    if (await this.runs.recover(this)) {
      this.runs.startPulling(this);
      return;
    }
    this.log.error('worker not pulling: a journal record needs recovery; heartbeats go on', this.logIds());
  }

  /** `LeaseChannel`: lease expiries are database time; compare them on this machine's clock. */
  /** The wire version of the current session (ADR 0060): its lease calls are shaped for it. */
  get wireVersion(): WireVersion {
    return wireVersionOf(this.negotiated) ?? CURRENT_WIRE_VERSION;
  }

  toLocalTime(serverMs: number): number {
    return this.ingress.toLocalTime(serverMs);
  }

  /** `LeaseChannel`: one lease call in the session chain, with the session fence of its turn. */
  leaseCall<A extends LeaseAction>(
    action: A,
    body: () => LeaseCallFields<A>,
    options: LeaseCallOptions<A> = {},
  ): Promise<IngressResponse<A>> {
    // Linked per call and unlinked once it settled: the stop signal lives as long as the worker (ADR 0049).
    const link = options.signal ? linkedSignal(options.signal, this.abort.signal) : undefined;
    const signal = link?.signal ?? this.abort.signal;
    const send = async (s: SessionState) => {
      try {
        const answer = await this.send(
          action,
          s.sessionId,
          buildLeaseCallRequest(action, { generation: s.generation, expectedVersion: s.version }, body()),
          {
            signal,
            ...(options.parse ? { parse: options.parse } : {}),
            ...(options.detached ? { lane: 'pull' as const, timeoutMs: options.detached.timeoutMs } : {}),
          },
        );
        options.onAnswer?.(answer);
        return answer;
      } catch (error) {
        if (isSessionFenced(error)) this.fence(action, error);
        throw error;
      }
    };
    const answer = options.detached
      ? // A held pull: outside the chain, with the fence of now (ADR 0019).
        Promise.resolve().then(() => send(this.liveSession(action)))
      : this.inChain(action, send);
    if (!link) return answer;
    return answer.finally(() => link.unlink());
  }

  /**
   * `LeaseChannel` (ADR 0051): the bundle fetch takes its turn in the chain, with the session fence of
   * that turn, and gives the chain back once the answer begins: the control plane checked both fences
   * before its first byte, so the download itself holds up no heartbeat or renewal.
   */
  leaseDownload(
    body: () => LeaseCallFields<'bundle'>,
    options: { readonly signal?: AbortSignal; readonly maxBytes: number },
  ): Promise<IncomingMessage> {
    // Linked for as long as the download lasts, then unlinked (ADR 0049: no AbortSignal.any).
    const link = options.signal ? linkedSignal(options.signal, this.abort.signal) : undefined;
    const signal = link?.signal ?? this.abort.signal;
    const answer = this.inChain('bundle', async (s) => {
      if (!this.ingress.download) throw new IllegalStateError('this ingress client serves no bundles');
      try {
        const res = await this.ingress.download(
          s.sessionId,
          buildBundleRequest({ generation: s.generation, expectedVersion: s.version }, body()),
          { maxBytes: options.maxBytes, signal },
        );
        this.rateLimits.answered();
        return res;
      } catch (error) {
        this.rateLimits.failed('bundle', error);
        if (isSessionFenced(error) || isCertificateRevoked(error))
          this.fence('bundle', error as IngressCallError);
        throw error;
      }
    });
    if (!link) return answer;
    return answer.then(
      (res) => {
        res.once('close', link.unlink);
        return res;
      },
      (error: unknown) => {
        link.unlink();
        throw error;
      },
    );
  }

  /**
   * R-WRK-5: drain (capacity 0, heartbeats go on), wait for local runs, then offline, all within the
   * stop budget. Runs still going late in the budget are cancelled (SIGTERM, SIGKILL after a grace)
   * and reported `cancelled` while their leases are live (`stopCancelPlan`). Rejects with a
   * `WorkerStopError` naming the phase on failure or timeout.
   */
  async stop(): Promise<void> {
    this.transition(['online'], 'stopping');
    const budgetMs = this.config.stopBudgetMs;
    const budget = setTimeout(() => this.abort.abort(new StopBudgetExceeded()), budgetMs);
    budget.unref();
    const plan = stopCancelPlan(budgetMs, this.config.killGraceMs);
    const cancel = setTimeout(() => this.runs?.cancelForStop(plan.graceMs), plan.cancelAtMs);
    cancel.unref();
    let phase: WorkerStopError['phase'] = 'drain';
    try {
      await this.runs?.stopPulling(); // the pull in flight is aborted; no new offer is taken
      await this.sessionCall('drain');
      this.log.info('worker draining', this.logIds());
      phase = 'local-runs';
      await this.waitForLocalRuns();
      phase = 'offline';
      this.stopHeartbeats();
      await this.sessionCall('offline');
      this.state = 'stopped';
      this.log.info('worker offline', this.logIds());
    } catch (error) {
      this.stopHeartbeats();
      if (this.state !== 'fenced') this.state = 'failed';
      const killed = (await this.runs?.abandonAll(WORKER_STOP_FAILED)) ?? 0;
      const why =
        this.abort.signal.reason instanceof StopBudgetExceeded
          ? `did not finish within the stop budget of ${budgetMs} ms`
          : error instanceof IngressCallError
            ? `failed: ${error.status || 'no status'} ${error.code}${error.reason ? ` (${error.reason})` : ''}`
            : `failed: ${error instanceof Error ? error.message : String(error)}`;
      const runs = killed ? `; killed ${killed} local run${killed === 1 ? '' : 's'} still going` : '';
      throw new WorkerStopError(phase, `stop ${why} during ${phase}${runs}`);
    } finally {
      clearTimeout(budget);
      clearTimeout(cancel);
      this.certificate?.stop();
      await this.runs?.close();
      await this.ingress.close();
    }
  }

  /** Closing the context without `stop()` releases the timer and socket; the session then expires. */
  async onModuleDestroy(): Promise<void> {
    if (this.state === 'online' || this.state === 'stopping') {
      this.log.warn('worker closed without stop; its session lease will expire', this.logIds());
    }
    this.stopHeartbeats();
    this.certificate?.stop();
    if (!this.abort.signal.aborted) this.abort.abort();
    await this.runs?.close();
    await this.ingress.close();
  }

  /** R-WRK-5: every local run ends and reports its completion, or the stop budget aborts the wait. */
  private async waitForLocalRuns(): Promise<void> {
    if (!this.runs || this.runs.localRuns === 0) return;
    this.log.info('waiting for local runs', { ...this.logIds(), localRuns: this.runs.localRuns });
    const signal = this.abort.signal;
    await new Promise<void>((resolve, reject) => {
      const aborted = () => reject(signal.reason);
      if (signal.aborted) return aborted();
      signal.addEventListener('abort', aborted, { once: true });
      this.runs!.whenIdle().then(resolve, reject);
    });
  }

  /** One loop, re-armed after each beat completes: beats never overlap, and it never holds the process. */
  private armHeartbeat(): void {
    this.heartbeatLoop ??= new ScheduledLoop(
      this.scheduler!,
      'worker-heartbeat',
      this.config.heartbeatMs,
      () => this.heartbeat(),
      { warn: (m) => this.log.warn('heartbeat loop', { detail: String(m) }) },
    );
    this.heartbeatLoop.start();
  }

  /** No beat starts after this; one in flight finishes behind the session call chain. */
  private stopHeartbeats(): void {
    this.heartbeats = false;
    void this.heartbeatLoop?.stop();
  }

  private async heartbeat(): Promise<void> {
    try {
      const answer = await this.sessionCall('heartbeat');
      this.log.debug('heartbeat', this.logIds());
      this.heartbeatFailures.succeeded(this.logIds());
      const cancels = (answer as Partial<HeartbeatResponse>).cancelAttemptIds ?? [];
      if (cancels.length) this.runs?.cancelAttempts(cancels);
    } catch (error) {
      // A fence is handled in sessionCall; anything else is transient until the lease says otherwise.
      // A 429 is the rate-limit burst's line, not one of its own.
      if (!(error instanceof IngressCallError && error.fenced) && !isRateLimited(error) && this.heartbeats) {
        this.heartbeatFailures.failed({ ...this.logIds(), ...describeError(error) });
      }
    }
  }

  /**
   * The capacity, and how many journal records wait for an operator when any do (the control plane
   * shows it in the worker view and /metrics, ADR 0029); absent when none, as older planes expect.
   */
  private heartbeatBody(fence: SessionFenceRequest) {
    return buildHeartbeatRequest({
      ...fence,
      availableSlots: this.availableSlots(),
      recoveryRequired: this.runs?.recoveryRequired ?? 0,
    });
  }

  /** Capacity 0 from the moment stop() begins (R-REG-6: drain sets capacity 0). */
  private availableSlots(): number {
    return this.state === 'online' && this.session?.status === 'online' ? this.config.maxConcurrentRuns : 0;
  }

  /**
   * One fenced session call, serialized behind the previous one; its body is built when it runs, so
   * it carries the latest version and capacity.
   */
  private sessionCall(action: 'heartbeat' | 'drain' | 'offline'): Promise<SessionResponse> {
    return this.inChain(action, async (s) => {
      try {
        const fence = { generation: s.generation, expectedVersion: s.version };
        const body =
          action === 'heartbeat'
            ? this.heartbeatBody(fence)
            : action === 'drain'
              ? buildDrainRequest(fence)
              : buildOfflineRequest(fence);
        const res = await this.send(action, s.sessionId, body, { signal: this.abort.signal });
        const next = readSessionResponse(res, this.config.workerId, s.sessionId);
        s.version = next.version;
        if (action === 'heartbeat' && next.status !== s.status) this.operatorMoved(next.status);
        s.status = next.status;
        return next;
      } catch (error) {
        if (error instanceof IngressCallError && error.fenced) this.fence(action, error);
        throw error;
      }
    });
  }

  /**
   * An admin drain or resume reached this worker through a heartbeat answer (ADR 0035): capacity 0
   * from now on, or its slots again; the pull loop goes on either way, so a resume needs no restart.
   */
  private operatorMoved(status: SessionResponse['status']): void {
    if (status === 'draining')
      this.log.info('worker drained by an operator: no new runs, its runs go on', this.logIds());
    else if (status === 'online')
      this.log.info('worker resumed by an operator: taking runs again', this.logIds());
  }

  /** Every ingress call of the worker goes out here: its outcome feeds the rate-limit burst log. */
  private async send<A extends IngressAction>(
    action: A,
    sessionId: string,
    body: unknown,
    options: IngressCallOptions,
  ): Promise<IngressResponse<A>> {
    try {
      const answer = await this.ingress.call(action, sessionId, body, options);
      this.rateLimits.answered();
      return answer;
    } catch (error) {
      this.rateLimits.failed(action, error);
      // A revoked certificate is heard nowhere any more: end as a fenced session does (ADR 0055).
      if (isCertificateRevoked(error) && this.session) this.fence(action, error);
      throw error;
    }
  }

  /** The one chain: each call starts after the previous one settled, with the live session then. */
  private inChain<T>(action: string, call: (s: SessionState) => Promise<T>): Promise<T> {
    const run = this.chain.then(() => call(this.liveSession(action)));
    this.chain = run.catch(() => undefined);
    return run;
  }

  private liveSession(action: string): SessionState {
    const s = this.session;
    if (!s || this.state === 'fenced') throw new IllegalStateError(`${action} without a live session`);
    return s;
  }

  /** R-WRK-6: stop everything, never re-register; the owner exits non-zero. */
  private fence(action: string, error: IngressCallError): void {
    if (this.state === 'fenced') return;
    this.state = 'fenced';
    this.stopHeartbeats();
    this.certificate?.stop();
    void this.runs?.stopPulling();
    const revoked = isCertificateRevoked(error);
    // Their leases went with the session, or no call of theirs would be heard (revoked).
    void this.runs?.abandonAll(revoked ? 'certificate_revoked' : 'session_fenced');
    this.abort.abort();
    const what = revoked ? 'worker certificate revoked' : 'worker session fenced';
    this.log.error(`${what}; stopping without re-registering`, {
      ...this.logIds(),
      action,
      code: error.code,
      reason: error.reason,
    });
    void this.ingress.close();
    this.announceFenced({ action, code: error.code, ...(error.reason ? { reason: error.reason } : {}) });
  }

  private transition(from: readonly WorkerState[], to: WorkerState): void {
    if (!from.includes(this.state))
      throw new IllegalStateError(`worker cannot go from ${this.state} to ${to}`);
    this.state = to;
  }

  private logIds() {
    return {
      workerId: this.config.workerId,
      sessionId: this.session?.sessionId,
      generation: this.session?.generation,
      version: this.session?.version,
    };
  }
}

/**
 * Every session answer is read with the contract's one strict reader (ADR 0056): about this worker
 * and session, exact fields, sane numbers; anything else is refused as `invalid_response`.
 */
export function readSessionResponse(value: unknown, workerId: string, sessionId: string): SessionResponse {
  try {
    return parseAnySessionAnswer(value, { workerId, sessionId });
  } catch (error) {
    if (!(error instanceof ContractError)) throw error;
    throw new IngressCallError(
      'session',
      200,
      'invalid_response',
      `session answer does not match this worker and session (${error.rule})`,
    );
  }
}
