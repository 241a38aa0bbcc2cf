/**
 * Issue 15 item 10 (ADR 0033): a long-poll pull held since before its worker lost the right to claim
 * — its certificate revoked or expired, or the worker disabled — must not claim a run queued afterwards. The pull
 * passed the mTLS guard when it arrived; each claim it makes while held checks the certificate again
 * (validity and revocation, through the same cache as the guard) and the claim's session fence still
 * refuses a disabled worker. Real control plane, real mTLS, both dialects (the claim and the queue
 * signals differ: one SQL statement and in-process signals on SQLite, `ql_claim` and LISTEN/NOTIFY on
 * PostgreSQL).
 */
import { X509Certificate, randomBytes } from 'node:crypto';
import { ingressPath } from '@ql/contracts';
import { PemPair } from '../../apps/control-plane/src/pki';
import { ManualClock, newSessionId, registerBody } from '../support/fixtures';
import { within } from '../support/remote-run-harness';
import {
  Dialect,
  HttpResult,
  TestDatabase,
  TRUST_DOMAIN,
  TestPlane,
  createTestDatabase,
  createTestPki,
  createWorkerCert,
  readPair,
  startTestPlane,
} from '../support/test-plane';

jest.setTimeout(60_000);

const CACHE_MS = 1_000;

describe.each<Dialect>(['sqlite', 'postgres'])('a held pull loses its right to claim (%s)', (dialect) => {
  let db: TestDatabase;
  let pki: Awaited<ReturnType<typeof createTestPki>>;
  let t: TestPlane;
  let task: string;
  // The revocation cache's clock: moved past QL_REVOCATION_CACHE_MS by hand, not slept through.
  const clock = new ManualClock(Date.now());

  beforeAll(async () => {
    db = await createTestDatabase(dialect);
    pki = await createTestPki(['worker-a', 'worker-b', 'worker-c', 'worker-d']);
    t = await startTestPlane(
      db,
      pki,
      {
        QL_INGRESS_RATE_BURST: '100000',
        QL_REVOCATION_CACHE_MS: String(CACHE_MS),
        QL_SESSION_LEASE_MS: '600000',
        // Only a signal wakes the held pull while a test runs: the safety-net re-claim is a minute away.
        QL_OFFER_RECHECK_MS: '60000',
      },
      { clock },
    );
    const created = await t.admin('POST', '/api/v1/tasks', {
      name: 'held pull',
      runtime: 'shell',
      command: 'true',
    });
    expect(created.status).toBe(201);
    task = (created.body as { id: string }).id;
  });
  afterAll(async () => {
    await t?.close();
    await db?.dispose();
    pki?.remove();
  });

  /** Registers `workerId` and holds one pull for it (20 s); resolves once the pull waits for a signal. */
  async function holdPull(
    workerId: string,
    creds: PemPair = readPair(pki.workers[workerId]!),
  ): Promise<{ creds: PemPair; answer: Promise<HttpResult> }> {
    const sessionId = newSessionId();
    const reg = await t.ingress(creds, ingressPath(workerId, sessionId, 'register'), registerBody());
    expect(reg.status).toBe(200);
    const { generation, version } = reg.body as { generation: number; version: number };
    const waiting = t.plane.core.offerWaiters.waitingCount;
    const answer = t.ingress(creds, ingressPath(workerId, sessionId, 'offers'), {
      generation,
      expectedVersion: version,
      offerId: newSessionId(),
      leaseToken: randomBytes(32).toString('base64url'),
      waitMs: 20_000,
    });
    await t.plane.core.offerWaiters.whenWaiting(waiting + 1);
    return { creds, answer };
  }

  async function trigger(): Promise<string> {
    const res = await t.admin('POST', `/api/v1/tasks/${task}/runs`, {});
    expect(res.status).toBe(201);
    return (res.body as { run: { id: string } }).run.id;
  }

  /** The run is queued and was never claimed; then it is cancelled, so the next test starts with an empty queue. */
  async function expectStillQueued(runId: string): Promise<void> {
    const run = await t.admin('GET', `/api/v1/runs/${runId}`);
    expect(run.body).toMatchObject({ status: 'queued', attempts: [] });
    // No offer left the plane for it: no attempt was ever claimed.
    const events = (run.body as { events: { type: string }[] }).events.map((e) => e.type);
    expect(events).not.toContain('attempt.claimed');
    expect((await t.admin('POST', `/api/v1/runs/${runId}/cancel`)).status).toBe(200);
  }

  /** Revokes the certificate, then moves the plane's clock through QL_REVOCATION_CACHE_MS. */
  async function revokePastTheWindow(creds: PemPair): Promise<void> {
    const revoked = await t.admin('POST', '/api/v1/certificates/revoke', {
      fingerprint: new X509Certificate(creds.certPem).fingerprint256,
    });
    expect(revoked.status).toBe(200);
    clock.advance(CACHE_MS);
  }

  /** The held pull got the guard's refusal, and the run queued while it was held was not claimed. */
  async function expectRefusedAndQueued(
    answer: Promise<HttpResult>,
    runId: string,
    message: string,
    code = 'worker_authentication_required',
  ) {
    const res = await answer;
    expect({ status: res.status, body: res.body }).toEqual({ status: 401, body: { code, message } });
    await expectStillQueued(runId);
  }

  it('a worker disabled while its pull is held: the run queued afterwards is not claimed; the pull is fenced', async () => {
    const { answer } = await holdPull('worker-b');
    expect((await t.admin('POST', '/api/v1/workers/worker-b/disable')).status).toBe(200);
    const runId = await trigger();
    const res = await answer;
    expect({ status: res.status, body: res.body }).toMatchObject({
      status: 409,
      body: { code: 'worker_session_fenced', reason: 'worker_disabled' },
    });
    await expectStillQueued(runId);
  });

  it('a certificate revoked while its pull is held: the run queued after the cache window is not claimed; the pull is refused', async () => {
    const { creds, answer } = await holdPull('worker-a');
    await revokePastTheWindow(creds);
    await expectRefusedAndQueued(
      answer,
      await trigger(),
      'this certificate has been revoked: enroll the machine again with a new token',
      'certificate_revoked',
    );
  });

  it('the run a refused pull was woken for goes to the next held pull at once, not at its re-check a minute later', async () => {
    const c = await holdPull('worker-c'); // the longest waiting: the run's wake-up comes to it first
    const d = await holdPull('worker-d');
    await revokePastTheWindow(c.creds);
    const runId = await trigger();
    expect((await c.answer).status).toBe(401);
    // Far below QL_OFFER_RECHECK_MS (60 s): only the passed-on wake-up can explain the offer.
    const offered = await within('the passed-on offer', 15_000, d.answer);
    expect(offered).toMatchObject({ status: 200, body: { status: 'offered', run: { runId } } });
  });

  it('a certificate that expires while its pull is held: the run queued afterwards is not claimed; the pull is refused', async () => {
    // Valid for TLS (the real clock) and for the plane's clock now; then the plane's clock passes notAfter.
    const notAfter = new Date(Math.ceil((Math.max(Date.now(), clock.now()) + 5_000) / 1_000) * 1_000);
    const shortLived = await createWorkerCert(pki.caPair(), {
      workerId: 'worker-e',
      trustDomain: TRUST_DOMAIN,
      notBefore: new Date(Math.min(Date.now(), clock.now()) - 60_000),
      notAfter,
    });
    const { answer } = await holdPull('worker-e', shortLived);
    clock.set(notAfter.getTime() + 1);
    await expectRefusedAndQueued(answer, await trigger(), 'the certificate has expired');
  });
});
