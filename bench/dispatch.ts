/**
 * Dispatch over the real wire (issue 9): a control plane in its own process, and in this process
 * worker sessions that drive the ingress exactly as a worker does, through the worker's own
 * `WorkerIngressHttpsClient` (one mTLS keep-alive socket per session): offers → starting → spawn a
 * no-op `sh -c true` in its own process group → running → completion.
 *
 * The sessions make each step visible (the worker process does not time them);
 * bench/worker-drain.ts measures the same drain by real worker processes.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { parseActivationResponse, parseOfferResponse, type ExecutionOffer } from '@ql/contracts';
import {
  IngressCallError,
  WorkerIngressHttpsClient,
} from '../apps/worker/src/ingress-client/worker-ingress-https.client';
import { benchRegistration, newSessionId } from './lib/fixtures';
import { median } from './lib/measure';
import { BenchPki, PlaneProcess } from './lib/plane';

/** The steps of one remote run as the worker sees them (wall time, this process). */
export const STEPS = ['claim', 'activation', 'spawn', 'completion'] as const;
export type Step = (typeof STEPS)[number];
export type StepTimes = Record<Step, number>;

/** One registered worker session driven over the real ingress. */
export class BenchSession {
  private generation = 0;
  private version = 0;
  private readonly sessionId = newSessionId();

  private constructor(
    readonly workerId: string,
    private readonly client: WorkerIngressHttpsClient,
  ) {}

  static async register(pki: BenchPki, plane: PlaneProcess, workerId: string): Promise<BenchSession> {
    const credentials = pki.credentials(workerId);
    const client = new WorkerIngressHttpsClient({
      origins: [plane.ready.ingressUrl],
      workerId,
      credentials: () => credentials,
    });
    const session = new BenchSession(workerId, client);
    const res = await client.call('register', session.sessionId, {
      ...benchRegistration(),
      maxConcurrentRuns: 1,
      availableSlots: 1,
    });
    session.generation = res.generation;
    session.version = res.version;
    return session;
  }

  /** One pull: the offer, or undefined when the answer is idle. */
  /** `waitMs` > 0: a long poll (ADR 0019), held by the control plane until a run is queued for it. */
  async pull(waitMs = 0): Promise<{ offer: ExecutionOffer; token: string } | undefined> {
    const token = randomBytes(32).toString('base64url');
    const raw = await this.client.call(
      'offers',
      this.sessionId,
      {
        generation: this.generation,
        expectedVersion: this.version,
        offerId: newSessionId(),
        leaseToken: token,
        ...(waitMs > 0 ? { waitMs } : {}),
      },
      waitMs > 0 ? { timeoutMs: waitMs + 10_000 } : {},
    );
    const answer = parseOfferResponse(JSON.stringify(raw));
    return answer.status === 'offered' ? { offer: answer, token } : undefined;
  }

  /** Runs an offered no-op to its committed completion; returns the time each step took. */
  async execute(held: { offer: ExecutionOffer; token: string }): Promise<Omit<StepTimes, 'claim'>> {
    const fence = (leaseVersion: number) => ({
      generation: this.generation,
      expectedVersion: this.version,
      offerId: held.offer.lease.offerId,
      leaseToken: held.token,
      leaseGeneration: held.offer.lease.leaseGeneration,
      leaseVersion,
    });
    const activate = async (action: 'starting' | 'running' | 'completion', body: object) => {
      const raw = await this.client.call(action, this.sessionId, body);
      const answer = parseActivationResponse(JSON.stringify(raw));
      if (answer.status !== 'applied') throw new Error(`${action}: ${answer.status}`);
      return answer.snapshot.leaseVersion;
    };
    const t0 = performance.now();
    const started = await activate('starting', fence(0));
    const t1 = performance.now();
    const child = spawn('/bin/sh', ['-c', 'true'], { detached: true, stdio: 'ignore' });
    const exited = new Promise<number | null>((resolve, reject) => {
      child.once('error', reject);
      child.once('exit', resolve);
    });
    await new Promise<void>((resolve, reject) => {
      child.once('spawn', resolve);
      child.once('error', reject);
    });
    const t2 = performance.now();
    const running = await activate('running', { ...fence(started), executorHandle: `pid:${child.pid}` });
    const t3 = performance.now();
    const exitCode = await exited;
    const t4 = performance.now();
    await activate('completion', { ...fence(running), outcome: 'succeeded', exitCode });
    const t5 = performance.now();
    return { activation: t1 - t0 + (t3 - t2), spawn: t2 - t1 + (t4 - t3), completion: t5 - t4 };
  }

  /** One fenced heartbeat of this session; its answer's version is the next one expected. */
  async heartbeat(): Promise<void> {
    const res = await this.client.call('heartbeat', this.sessionId, {
      generation: this.generation,
      expectedVersion: this.version,
      availableSlots: 1,
    });
    this.version = res.version;
  }

  /**
   * The floor of one ingress call on this socket: a heartbeat with a body the edge refuses (400
   * before any database work; bad input changes nothing). HTTP, TLS, routing, guard and parsing.
   */
  async edgeFloorMs(calls: number): Promise<number> {
    const times: number[] = [];
    for (let i = 0; i < calls; i++) {
      const t0 = performance.now();
      try {
        await this.client.call('heartbeat', this.sessionId, { generation: 'bench' });
        throw new Error('an invalid heartbeat was accepted');
      } catch (error) {
        if (!(error instanceof IngressCallError) || error.status !== 400) throw error;
      }
      times.push(performance.now() - t0);
    }
    return median(times);
  }

  close(): Promise<void> {
    return this.client.close();
  }
}

/** A no-op shell task: its id, and a function that triggers one run and answers its id and creation time. */
/** A shell task (`true` unless another command is given) and a trigger that queues a run of it. */
export async function noopTask(plane: PlaneProcess, name: string, command = 'true') {
  const task = await plane.admin<{ id: string }>('POST', '/api/v1/tasks', {
    name,
    command,
    runtime: 'shell',
    timeoutMs: 60_000,
  });
  if (task.status !== 201) throw new Error(`create task: ${task.status} ${JSON.stringify(task.body)}`);
  const taskId = task.body.id;
  const trigger = async (): Promise<{ runId: string; createdAtMs: number }> => {
    const res = await plane.admin<{ run: { id: string; createdAt: string } }>(
      'POST',
      `/api/v1/tasks/${task.body.id}/runs`,
      {},
    );
    if (res.status !== 201) throw new Error(`trigger: ${res.status} ${JSON.stringify(res.body)}`);
    return { runId: res.body.run.id, createdAtMs: Date.parse(res.body.run.createdAt) };
  };
  return { taskId, trigger };
}

export interface DrainSample {
  readonly sessions: number;
  readonly runs: number;
  readonly seconds: number;
  readonly runsPerSecond: number;
  /** Median wall time per run of each step, as the sessions saw it. */
  readonly stepMs: StepTimes;
  /** Pulls that found nothing (a session that came too late for the last runs). */
  readonly idlePulls: number;
}

/**
 * `runs` queued runs, drained by `sessions.length` closed loops (pull; when offered, run it to its
 * committed completion). Timed from the first pull to the last completion.
 */
export async function drain(sessions: readonly BenchSession[], runs: number): Promise<DrainSample> {
  const steps: Record<Step, number[]> = { claim: [], activation: [], spawn: [], completion: [] };
  let completed = 0;
  let idlePulls = 0;
  const t0 = performance.now();
  const loop = async (s: BenchSession) => {
    while (completed < runs) {
      const c0 = performance.now();
      const held = await s.pull();
      if (!held) {
        idlePulls++;
        if (idlePulls > runs * 100) throw new Error(`drain stalled at ${completed}/${runs}`);
        continue;
      }
      steps.claim.push(performance.now() - c0);
      const times = await s.execute(held);
      for (const step of ['activation', 'spawn', 'completion'] as const) steps[step].push(times[step]);
      completed++;
    }
  };
  await Promise.all(sessions.map(loop));
  const seconds = (performance.now() - t0) / 1000;
  return {
    sessions: sessions.length,
    runs: completed,
    seconds,
    runsPerSecond: completed / seconds,
    stepMs: {
      claim: median(steps.claim),
      activation: median(steps.activation),
      spawn: median(steps.spawn),
      completion: median(steps.completion),
    },
    idlePulls,
  };
}

export interface LatencySample {
  /** Offer received by a puller − the run's `createdAt` (database time of the trigger's insert). */
  readonly fromCommitMs: number[];
  /** Offer received − the trigger request sent (the upper bound, trigger round trip included). */
  readonly fromTriggerMs: number[];
}

/**
 * Idle pullers polling `offers` every `intervalMs` (staggered) — or, with `waitMs` > 0, each keeping
 * one long-poll pull held (ADR 0019); one run triggered at a time, with an idle pause between; the
 * puller that receives the offer records when, and runs it to completion.
 */
export async function queueToOffer(
  sessions: readonly BenchSession[],
  trigger: () => Promise<{ runId: string; createdAtMs: number }>,
  samples: number,
  intervalMs: number,
  waitMs = 0,
): Promise<LatencySample> {
  const offers = new OfferBoard();
  let stop = false;
  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
  const pullers = sessions.map(async (s, i) => {
    await sleep((intervalMs * i) / sessions.length);
    while (!stop) {
      const held = await s.pull(waitMs);
      if (held) {
        offers.received(held.offer.run.runId, Date.now());
        await s.execute(held);
      }
      if (waitMs === 0) await sleep(intervalMs);
    }
  });
  const fromCommitMs: number[] = [];
  const fromTriggerMs: number[] = [];
  try {
    for (let i = 0; i < samples; i++) {
      await sleep(intervalMs + Math.random() * intervalMs);
      const sent = Date.now();
      const { runId, createdAtMs } = await trigger();
      const at = await offers.when(runId, 30_000);
      fromCommitMs.push(at - createdAtMs);
      fromTriggerMs.push(at - sent);
    }
  } finally {
    stop = true;
    await Promise.all(pullers);
  }
  return { fromCommitMs, fromTriggerMs };
}

/** When each run's offer reached a puller; the offer may arrive before its trigger's answer does. */
class OfferBoard {
  private readonly at = new Map<string, number>();
  private readonly waiting = new Map<string, (at: number) => void>();

  received(runId: string, at: number): void {
    const waiter = this.waiting.get(runId);
    if (waiter) waiter(at);
    else this.at.set(runId, at);
  }

  when(runId: string, timeoutMs: number): Promise<number> {
    const known = this.at.get(runId);
    if (known !== undefined) return Promise.resolve(known);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`no offer for run ${runId} in ${timeoutMs} ms`)),
        timeoutMs,
      );
      this.waiting.set(runId, (at) => {
        clearTimeout(timer);
        resolve(at);
      });
    });
  }
}

export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}
