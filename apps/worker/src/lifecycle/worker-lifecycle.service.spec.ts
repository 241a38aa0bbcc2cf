// Size: one fake control plane and every lifecycle path against it (register and its retries, heartbeats, drain, stop, fences).
import { getEventListeners } from 'node:events';
import { SchedulerRegistry } from '@nestjs/schedule';
import type { IngressAction } from '@ql/contracts';
import { isUuidV7 } from '@ql/domain';
import { createIdGenerator, parseRegistration } from '@ql/contracts';
import { testProbe } from '../../test-support/worker-harness';
import { HostProbe } from '../config/capabilities';
import { loadWorkerConfig } from '../config/worker-config';
import { IngressCallError, IngressCallOptions } from '../ingress-client/worker-ingress-https.client';
import { JsonLineLog } from '../logging/worker-log';
import {
  REGISTER_RETRY_FIRST_MS,
  REGISTER_RETRY_MAX_MS,
  WorkerIngress,
  WorkerLifecycleService,
  ProtocolUnsupported,
  WorkerStopError,
  readSessionResponse,
  stopCancelPlan,
} from './worker-lifecycle.service';

interface Call {
  readonly action: IngressAction;
  readonly sessionId: string;
  readonly body: Record<string, unknown>;
}
type Reply = (call: Call) => Promise<unknown> | unknown;

/** A control plane in memory: versions advance by one per accepted call, like the real one; `reply` overrides an answer. */
class FakeIngress implements WorkerIngress {
  readonly calls: Call[] = [];
  inflight = 0;
  maxInflight = 0;
  closed = 0;
  version = 0;
  status: 'online' | 'draining' | 'offline' = 'online';
  reply: Partial<Record<IngressAction, Reply>> = {};
  lastSignal: AbortSignal | undefined;

  async call<A extends IngressAction>(
    action: A,
    sessionId: string,
    body: unknown,
    options: IngressCallOptions = {},
  ): Promise<never> {
    const call: Call = { action, sessionId, body: body as Record<string, unknown> };
    this.calls.push(call);
    this.lastSignal = options.signal;
    this.inflight++;
    this.maxInflight = Math.max(this.maxInflight, this.inflight);
    try {
      const answer = Promise.resolve(this.reply[action] ? this.reply[action]!(call) : this.accept(call));
      let fail = () => {};
      const aborted = new Promise<never>((_, reject) => {
        fail = () => reject(new IngressCallError(action, 0, 'aborted', 'aborted'));
        if (options.signal?.aborted) fail();
        options.signal?.addEventListener('abort', fail, { once: true });
      });
      try {
        return (await Promise.race([answer, aborted])) as never;
      } finally {
        options.signal?.removeEventListener('abort', fail); // as the real client does
      }
    } finally {
      this.inflight--;
    }
  }

  accept(call: Call) {
    if (call.action !== 'register') {
      if (call.body.expectedVersion !== this.version) {
        throw new IngressCallError(call.action, 409, 'worker_session_fenced', 'stale', 'version_mismatch');
      }
      this.version++;
    }
    if (call.action === 'drain') this.status = 'draining';
    if (call.action === 'offline') this.status = 'offline';
    return {
      outcome: 'created',
      workerId: 'worker-a',
      sessionId: call.sessionId,
      generation: 1,
      version: this.version,
      status: this.status,
      leaseExpiresAt: new Date().toISOString(),
      maxConcurrentRuns: 2,
      availableSlots: 2,
    };
  }

  toLocalTime(serverMs: number): number {
    return serverMs;
  }

  async close() {
    this.closed++;
  }
}

const probe: HostProbe = { ...testProbe, arch: () => 'arm64' };

/** Timers are fake: heartbeats and budgets fire when a test moves the clock, never on wall time. */
const tick = (ms: number) => jest.advanceTimersByTimeAsync(ms);
const beats = (ingress: FakeIngress) => ingress.calls.filter((c) => c.action === 'heartbeat');

describe('WorkerLifecycleService', () => {
  let ingress: FakeIngress;
  let lines: string[];
  let service: WorkerLifecycleService;
  let scheduler: SchedulerRegistry;

  const build = (env: Record<string, string> = {}) => {
    const config = loadWorkerConfig({
      QL_WORKER_ID: 'worker-a',
      QL_WORKER_MAX_CONCURRENT_RUNS: '2',
      QL_WORKER_HEARTBEAT_MS: '50',
      QL_WORKER_REQUEST_TIMEOUT_MS: '100',
      QL_WORKER_STOP_BUDGET_MS: '2000',
      QL_WORKER_LABELS: 'zone=secret-site',
      ...env,
    });
    return new WorkerLifecycleService(
      config,
      ingress,
      createIdGenerator(),
      new JsonLineLog('debug', (l) => lines.push(l)),
      probe,
      scheduler,
    );
  };
  const logged = () => lines.map((l) => JSON.parse(l) as Record<string, unknown>);

  beforeEach(() => {
    jest.useFakeTimers({ doNotFake: ['nextTick', 'setImmediate', 'queueMicrotask'] });
    ingress = new FakeIngress();
    scheduler = new SchedulerRegistry();
    lines = [];
    service = build();
  });
  afterEach(async () => {
    await service.onModuleDestroy();
    expect(jest.getTimerCount()).toBe(0); // nothing left armed once the module is destroyed
    jest.useRealTimers();
  });

  it('does nothing until start(): no call, no timer, no log', () => {
    expect(ingress.calls).toHaveLength(0);
    expect(jest.getTimerCount()).toBe(0);
    expect(lines).toHaveLength(0);
    expect(service.currentState).toBe('idle');
  });

  it('refuses to start outside the worker profile (no scheduler in its module graph): no call, no timer', async () => {
    const config = loadWorkerConfig({ QL_WORKER_ID: 'worker-a' });
    const unscheduled = new WorkerLifecycleService(
      config,
      ingress,
      createIdGenerator(),
      new JsonLineLog('debug', (l) => lines.push(l)),
      probe,
    );
    await expect(unscheduled.start()).rejects.toThrow(/QL_PROFILE=worker/);
    expect(unscheduled.currentState).toBe('idle');
    expect(ingress.calls).toHaveLength(0);
    expect(jest.getTimerCount()).toBe(0);
  });

  describe('protocol negotiation (ADR 0060)', () => {
    /** The first release's control plane: only 3 served, anything else its plain 400. */
    const v1Plane = (call: Call) => {
      if (call.body.protocolVersion !== 3)
        throw new IngressCallError('register', 400, 'invalid_worker_request', 'protocolVersion: unsupported');
      return ingress.accept(call);
    };
    /** A control plane that serves none of the worker's versions. */
    const refuseEvery = (message: string) => () => {
      throw new IngressCallError('register', 400, 'protocol_unsupported', message);
    };
    const versions = () =>
      ingress.calls.filter((c) => c.action === 'register').map((c) => c.body.protocolVersion);

    it('registers with 4 and, refused by a control plane that serves only 3, registers again with 3 under a new session id', async () => {
      ingress.reply.register = v1Plane;
      await service.start();
      expect(versions()).toEqual([4, 3]);
      const [first, second] = ingress.calls;
      expect(second!.sessionId).not.toBe(first!.sessionId);
      expect(service.protocolVersion).toBe(3);
      expect(service.currentSession!.sessionId).toBe(second!.sessionId);
      expect(service.currentState).toBe('online');
    });

    it('QL_WORKER_PROTOCOL_MAX=3 registers with 3 only (a worker held to v1)', async () => {
      service = build({ QL_WORKER_PROTOCOL_MAX: '3' }); // the one built before never started
      await service.start();
      expect(versions()).toEqual([3]);
      expect(service.protocolVersion).toBe(3);
    });

    it('QL_WORKER_PROTOCOL_MAX=3 refused too (a control plane serving only 4) is ProtocolUnsupported at once', async () => {
      service = build({ QL_WORKER_PROTOCOL_MAX: '3' });
      ingress.reply.register = refuseEvery('this control plane serves 4');
      await expect(service.start()).rejects.toThrow(/speaks \(3\.\.3\)/);
      expect(versions()).toEqual([3]);
    });

    it('ends the start with ProtocolUnsupported, naming both sides, once every version it speaks was refused', async () => {
      ingress.reply.register = refuseEvery(
        'protocol_unsupported: the worker offered protocol version 3; this control plane serves 5..6',
      );
      const error = await service.start().catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ProtocolUnsupported);
      expect((error as Error).message).toMatch(/speaks \(3\.\.4\).*serves 5\.\.6/);
      expect(versions()).toEqual([4, 3]);
      expect(service.currentState).toBe('failed');
    });

    it('any other 400 ends the start at once: no step down', async () => {
      ingress.reply.register = () => {
        throw new IngressCallError(
          'register',
          400,
          'invalid_worker_request',
          'softwareVersion: invalid_semver',
        );
      };
      await expect(service.start()).rejects.toThrow(/softwareVersion/);
      expect(versions()).toEqual([4]);
    });
  });

  it('registers a new UUIDv7 session with a valid snapshot, then heartbeats carry the last returned version', async () => {
    await service.start();
    const [register] = ingress.calls;
    expect(register!.action).toBe('register');
    expect(isUuidV7(register!.sessionId)).toBe(true);
    const snapshot = parseRegistration(register!.body);
    expect(snapshot).toMatchObject({
      maxConcurrentRuns: 2,
      availableSlots: 2,
      softwareVersion: '0.1.0',
      protocolVersion: 4, // wire v2 (ADR 0060)
    });
    expect(snapshot.capabilities.capabilities).toMatchObject({
      architecture: 'arm64',
      operatingSystem: 'linux',
      executors: ['local-process'],
      runtimes: [
        { name: 'node', version: '20.20.2' },
        { name: 'python', version: '3.11.7' },
      ],
      memoryMiB: 512,
      diskMiB: 2048,
      labels: { zone: 'secret-site' },
    });
    expect(jest.getTimerCount()).toBe(1); // exactly one heartbeat timer, and it is the scheduler's
    expect(scheduler.getTimeouts()).toEqual(['worker-heartbeat']);
    await tick(150);
    expect(beats(ingress).map((c) => c.body)).toEqual(
      [0, 1, 2].map((v) => ({ generation: 1, expectedVersion: v, availableSlots: 2 })),
    );
    expect(beats(ingress).every((c) => c.sessionId === register!.sessionId)).toBe(true);
    expect(jest.getTimerCount()).toBe(1);
    expect(lines.join('')).not.toContain('secret-site'); // label values never reach the log
  });

  it('never overlaps heartbeats: a slow answer delays the next beat instead of stacking calls', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    ingress.reply.heartbeat = async (call) => {
      await gate;
      return ingress.accept(call);
    };
    await service.start();
    await tick(50);
    expect(beats(ingress)).toHaveLength(1);
    await tick(1000); // twenty periods pass while the first beat hangs
    expect(beats(ingress)).toHaveLength(1);
    expect(jest.getTimerCount()).toBe(0); // not re-armed until the beat completes
    release();
    await tick(50);
    expect(beats(ingress)).toHaveLength(2);
    expect(beats(ingress)[1]!.body).toMatchObject({ expectedVersion: 1 });
    expect(ingress.maxInflight).toBe(1);
  });

  it('on 409 from a heartbeat: announces the fence, stops calling, closes the client and never re-registers', async () => {
    await service.start();
    await tick(50);
    ingress.reply.heartbeat = (call) => {
      throw new IngressCallError(call.action, 409, 'worker_session_fenced', 'replaced', 'session_replaced');
    };
    await tick(50);
    await expect(service.whenFenced()).resolves.toEqual({
      action: 'heartbeat',
      code: 'worker_session_fenced',
      reason: 'session_replaced',
    });
    expect(service.currentState).toBe('fenced');
    expect(ingress.closed).toBeGreaterThan(0);
    expect(jest.getTimerCount()).toBe(0);
    const callsAtFence = ingress.calls.length;
    await tick(1000);
    expect(ingress.calls).toHaveLength(callsAtFence);
    expect(ingress.calls.filter((c) => c.action === 'register')).toHaveLength(1);
    await expect(service.stop()).rejects.toThrow(/cannot go from fenced/);
    expect(logged().find((l) => String(l.msg).includes('fenced'))).toMatchObject({
      level: 'error',
      reason: 'session_replaced',
    });
  });

  it('stop(): drain, heartbeats go on with 0 slots and the drain version, then offline, then close', async () => {
    let releaseDrain!: () => void;
    const drainGate = new Promise<void>((r) => (releaseDrain = r));
    ingress.reply.drain = async (call) => {
      await drainGate;
      return ingress.accept(call);
    };
    await service.start();
    await tick(50);
    const stopping = service.stop();
    await tick(60); // the heartbeat timer fires while the drain is in flight: its beat waits behind it
    const drainAt = ingress.calls.findIndex((c) => c.action === 'drain');
    expect(ingress.calls.slice(drainAt).map((c) => c.action)).toEqual(['drain']);
    releaseDrain();
    await stopping;
    const after = ingress.calls.slice(drainAt);
    expect(after.map((c) => c.action)).toEqual(['drain', 'heartbeat', 'offline']);
    expect(after[0]!.body).toEqual({ generation: 1, expectedVersion: 1 });
    expect(after[1]!.body).toEqual({ generation: 1, expectedVersion: 2, availableSlots: 0 });
    expect(after[2]!.body).toEqual({ generation: 1, expectedVersion: 3 });
    expect(ingress.maxInflight).toBe(1);
    expect(ingress.closed).toBe(1);
    expect(service.currentState).toBe('stopped');
    expect(jest.getTimerCount()).toBe(0);
    await tick(1000);
    expect(ingress.calls.slice(drainAt)).toHaveLength(3); // no heartbeat after offline
  });

  it('stop() past its budget rejects, says so and names the phase', async () => {
    service = build({ QL_WORKER_STOP_BUDGET_MS: '300' });
    ingress.reply.offline = () => new Promise(() => undefined); // never answers
    await service.start();
    const stopping = service.stop().then(
      () => undefined,
      (e: unknown) => e,
    );
    await tick(300);
    const error = await stopping;
    expect(error).toBeInstanceOf(WorkerStopError);
    expect((error as Error).message).toBe(
      'stop did not finish within the stop budget of 300 ms during offline',
    );
    expect(ingress.closed).toBe(1);
  });

  it('stop() reports a refused drain with its status and code, and never goes offline', async () => {
    ingress.reply.drain = (call) => {
      throw new IngressCallError(call.action, 503, 'worker_ingress_unavailable', 'down');
    };
    await service.start();
    await expect(service.stop()).rejects.toThrow('stop failed: 503 worker_ingress_unavailable during drain');
    expect(ingress.calls.some((c) => c.action === 'offline')).toBe(false);
    expect(jest.getTimerCount()).toBe(0);
  });

  it('a transient heartbeat failure is logged and the next beat still comes', async () => {
    await service.start();
    let failures = 0;
    ingress.reply.heartbeat = (call) => {
      if (failures++ === 0)
        throw new IngressCallError(call.action, 0, 'transport_error', 'reset', 'ECONNRESET');
      return ingress.accept(call);
    };
    await tick(100);
    expect(beats(ingress).map((c) => c.body.expectedVersion)).toEqual([0, 0]);
    expect(logged().find((l) => l.msg === 'heartbeat failed')).toMatchObject({
      level: 'warn',
      code: 'transport_error',
      reason: 'ECONNRESET',
    });
  });

  it('register is sent again, same session, while no answer comes (timeout, 503), 0.5 s then 1 s apart; one warning, one recovery line', async () => {
    const noAnswers = [
      new IngressCallError('register', 0, 'timeout', 'no complete answer within 100 ms'),
      new IngressCallError('register', 503, 'control_plane_unavailable', 'starting'),
    ];
    ingress.reply.register = (call) => {
      const error = noAnswers.shift();
      if (error) throw error;
      return ingress.accept(call);
    };
    const started = service.start();
    await tick(0);
    expect(ingress.calls).toHaveLength(1);
    await tick(REGISTER_RETRY_FIRST_MS - 1);
    expect(ingress.calls).toHaveLength(1); // not before its pause
    await tick(1);
    expect(ingress.calls).toHaveLength(2);
    await tick(2 * REGISTER_RETRY_FIRST_MS);
    await started;
    const registers = ingress.calls.filter((c) => c.action === 'register');
    expect(registers).toHaveLength(3);
    expect(new Set(registers.map((c) => c.sessionId)).size).toBe(1); // a committed try is answered as a replay
    expect(service.currentState).toBe('online');
    expect(logged().filter((l) => String(l.msg).startsWith('register '))).toEqual([
      expect.objectContaining({ level: 'warn', msg: 'register failed', code: 'timeout', retryInMs: 500 }),
      expect.objectContaining({ level: 'info', msg: 'register recovered', failures: 2 }),
    ]);
  });

  it("a 429 on register waits its Retry-After when longer than the pause, and is the rate-limit burst's warning, not a register failure (ADR 0042)", async () => {
    let refused = false;
    ingress.reply.register = (call) => {
      if (refused) return ingress.accept(call);
      refused = true;
      throw new IngressCallError('register', 429, 'worker_rate_limited', 'too many', undefined, 2_000);
    };
    const started = service.start();
    await tick(0);
    await tick(2_000 - 1);
    expect(ingress.calls).toHaveLength(1); // the backoff alone would have sent it after 500 ms
    await tick(1);
    await started;
    expect(ingress.calls.filter((c) => c.action === 'register')).toHaveLength(2);
    expect(logged().filter((l) => l.level === 'warn')).toEqual([
      expect.objectContaining({ msg: expect.stringMatching(/^control plane rate-limits this worker/) }),
    ]);
  });

  it('a control plane waiting for `migrate` (503 migrations_pending) is asked again at its Retry-After, not after a growing backoff', async () => {
    let refusals = 6;
    ingress.reply.register = (call) => {
      if (refusals-- > 0)
        throw new IngressCallError(
          'register',
          503,
          'worker_ingress_unavailable',
          'migrations pending',
          'migrations_pending',
          2_000,
        );
      return ingress.accept(call);
    };
    // Settled either way, so a failed expectation below does not leave the start's rejection unhandled.
    const started = service.start().then(
      () => 'online',
      (error: unknown) => String(error),
    );
    await tick(0);
    // Six refusals 2 s apart: 12 s in all, where the backoff (0.5, 1, 2, 4, 8, 10 s …) would have sent 4.
    for (let i = 1; i <= 6; i++) {
      await tick(2_000);
      expect(ingress.calls).toHaveLength(i + 1);
    }
    expect(await started).toBe('online');
  });

  it('a stop while register waits to be sent again ends the start: cancelled, nothing more sent', async () => {
    ingress.reply.register = () => {
      throw new IngressCallError('register', 0, 'transport_error', 'connect ECONNREFUSED', 'ECONNREFUSED');
    };
    const started = service.start();
    await tick(0);
    service.cancelStart();
    await expect(started).rejects.toThrow();
    expect(service.startCancelled).toBe(true);
    expect(service.currentState).toBe('failed');
    await tick(REGISTER_RETRY_MAX_MS);
    expect(ingress.calls).toHaveLength(1);
  });

  it('missing credentials are not waited for: the start fails at once', async () => {
    ingress.reply.register = () => {
      throw new IngressCallError('register', 0, 'credentials_unavailable', 'ENOENT /etc/ql/worker.key');
    };
    await expect(service.start()).rejects.toMatchObject({ code: 'credentials_unavailable' });
    expect(ingress.calls).toHaveLength(1);
    expect(service.startCancelled).toBe(false);
  });

  it('a lease call with its own signal is linked to the stop signal only while it runs (ADR 0049)', async () => {
    await service.start();
    const stop = (service as unknown as { abort: AbortController }).abort.signal;
    const seen: AbortSignal[] = [];
    // The fields of a held lease (the lease fence the chain adds the session fence to).
    const lease = {
      offerId: createIdGenerator().uuidV7(),
      leaseToken: 'k'.repeat(43),
      leaseGeneration: 1,
      leaseVersion: 0,
    };
    ingress.reply.starting = () => {
      seen.push(ingress.lastSignal!);
      return {};
    };
    for (let i = 0; i < 5; i++) {
      const call = new AbortController();
      await service.leaseCall('starting', () => lease, { signal: call.signal });
      expect(getEventListeners(stop, 'abort')).toHaveLength(0);
      expect(getEventListeners(call.signal, 'abort')).toHaveLength(0);
    }
    // While a call runs, either signal aborts it.
    const call = new AbortController();
    ingress.reply.starting = () => new Promise(() => {});
    const pending = service.leaseCall('starting', () => lease, { signal: call.signal });
    await tick(0);
    expect(getEventListeners(stop, 'abort')).toHaveLength(1);
    call.abort();
    await expect(pending).rejects.toMatchObject({ code: 'aborted' });
    expect(getEventListeners(stop, 'abort')).toHaveLength(0);
    expect(seen).toHaveLength(5);
  });

  it('a failed registration leaves no heartbeat and closes the client', async () => {
    ingress.reply.register = (call) => {
      throw new IngressCallError(call.action, 401, 'worker_authentication_required', 'no');
    };
    await expect(service.start()).rejects.toMatchObject({ status: 401 });
    expect(service.currentState).toBe('failed');
    expect(ingress.closed).toBe(1);
    expect(jest.getTimerCount()).toBe(0);
  });
});

describe('readSessionResponse', () => {
  const ids = createIdGenerator();
  const sessionId = ids.uuidV7();
  const answer = {
    workerId: 'worker-a',
    sessionId,
    generation: 1,
    version: 3,
    status: 'online',
    leaseExpiresAt: new Date().toISOString(),
    maxConcurrentRuns: 2,
    availableSlots: 2,
  };
  const read = (extra: Record<string, unknown>) => () =>
    readSessionResponse({ ...answer, ...extra }, 'worker-a', sessionId);

  it('accepts a session answer without cancel intents and a heartbeat answer with up to 64', () => {
    expect(read({})()).toMatchObject({ version: 3 });
    const cancelAttemptIds = Array.from({ length: 64 }, () => ids.uuidV7());
    expect(read({ cancelAttemptIds })()).toMatchObject({ cancelAttemptIds });
  });

  it.each<[string, unknown]>([
    ['not a list', 'x'],
    ['over 64', Array.from({ length: 65 }, () => ids.uuidV7())],
    ['not an attempt id', ['run-1']],
    ['not a string', [42]],
  ])('refuses cancel intents that are %s', (_case, cancelAttemptIds) => {
    expect(read({ cancelAttemptIds })).toThrow(expect.objectContaining({ code: 'invalid_response' }));
  });
});

describe('stopCancelPlan (issue 29 item 4)', () => {
  it.each<[number, number, number, number]>([
    // budget, kill grace → cancelled at, grace then: the kill and the reports fit in the budget
    [10_000, 5_000, 5_000, 3_500], // the defaults: half the budget, 1.5 s kept for reports and offline
    [60_000, 5_000, 53_500, 5_000], // a long budget: the full grace, then 1.5 s
    [10_000, 1_000, 7_500, 1_000],
    [1_500, 5_000, 750, 375], // a short budget: half of it, split between the grace and the reports
    [100, 100, 50, 25],
  ])(
    'budget %i ms, kill grace %i ms: cancelled at %i ms, SIGKILL %i ms later',
    (budget, grace, at, after) => {
      const plan = stopCancelPlan(budget, grace);
      expect(plan).toEqual({ cancelAtMs: at, graceMs: after });
      expect(plan.cancelAtMs + plan.graceMs).toBeLessThan(budget);
    },
  );
});
