import { randomBytes } from 'node:crypto';
import { ExecutionOffer, ingressPath, parseOfferResponse } from '@ql/contracts';
import { newSessionId, registerBody } from './fixtures';
import type { TestPlane, readPair } from './test-plane';

/** A registered worker session as the e2e tests drive it over the ingress. */
export interface IngressSession {
  readonly workerId: string;
  readonly sessionId: string;
  readonly creds: ReturnType<typeof readPair>;
  readonly generation: number;
  readonly version: number;
}

/** A new session of `workerId`, registered over the ingress with `creds` (its own certificate). */
export async function registerSession(
  t: TestPlane,
  creds: ReturnType<typeof readPair>,
  workerId: string,
  body: Record<string, unknown> = registerBody(),
): Promise<IngressSession> {
  const sessionId = newSessionId();
  const res = await t.ingress(creds, ingressPath(workerId, sessionId, 'register'), body);
  if (res.status !== 200) throw new Error(`register answered ${res.status}: ${res.raw}`);
  const { generation, version } = res.body as { generation: number; version: number };
  return { workerId, sessionId, creds, generation, version };
}

/** The holder of a run lease: its offer and the token the worker made. */
export interface LeaseHolder {
  readonly offer: ExecutionOffer;
  readonly token: string;
}

/** The lease fence every activation call carries. */
export const leaseFence = (s: IngressSession, h: LeaseHolder, leaseVersion = 0) => ({
  generation: s.generation,
  expectedVersion: s.version,
  offerId: h.offer.lease.offerId,
  leaseToken: h.token,
  leaseGeneration: h.offer.lease.leaseGeneration,
  leaseVersion,
});

/** One pull by `s` under a new offer id and token: the offer it got and that token (an idle answer throws). */
export async function pullOffer(t: TestPlane, s: IngressSession): Promise<LeaseHolder> {
  const token = randomBytes(32).toString('base64url');
  const res = await t.ingress(s.creds, ingressPath(s.workerId, s.sessionId, 'offers'), {
    generation: s.generation,
    expectedVersion: s.version,
    offerId: newSessionId(),
    leaseToken: token,
  });
  const offer = parseOfferResponse(res.raw);
  if (offer.status !== 'offered') throw new Error(`expected an offer, got ${res.status} ${res.raw}`);
  return { offer, token };
}

/** A new shell task's run, triggered over the admin API and pulled by `s`: its holder. */
export async function pullNewRun(t: TestPlane, s: IngressSession, name: string): Promise<LeaseHolder> {
  const task = await t.admin('POST', '/api/v1/tasks', { name, command: 'echo hello', runtime: 'shell' });
  if (task.status !== 201) throw new Error(`task create answered ${task.status}: ${task.raw}`);
  const run = await t.admin('POST', `/api/v1/tasks/${(task.body as { id: string }).id}/runs`, {});
  if (run.status !== 201) throw new Error(`trigger answered ${run.status}: ${run.raw}`);
  return pullOffer(t, s);
}

const leaseVersion = (body: unknown) =>
  (body as { snapshot: { leaseVersion: number } }).snapshot.leaseVersion;

/** The held run's `starting` report: the lease version its next call carries. */
export async function reportStarting(t: TestPlane, s: IngressSession, h: LeaseHolder): Promise<number> {
  const starting = await t.ingress(
    s.creds,
    ingressPath(s.workerId, s.sessionId, 'starting'),
    leaseFence(s, h),
  );
  if (starting.status !== 200) throw new Error(`starting answered ${starting.status}: ${starting.raw}`);
  return leaseVersion(starting.body);
}

/** The held run through `starting` and `running`: the lease version its next call carries. */
export async function startHeldRun(t: TestPlane, s: IngressSession, h: LeaseHolder): Promise<number> {
  const running = await t.ingress(s.creds, ingressPath(s.workerId, s.sessionId, 'running'), {
    ...leaseFence(s, h, await reportStarting(t, s, h)),
    executorHandle: 'pid:1',
  });
  if (running.status !== 200) throw new Error(`running answered ${running.status}: ${running.raw}`);
  return leaseVersion(running.body);
}
