/**
 * Issue 27 items 9 and 10 (ADR 0045 "the unauthenticated edge"), through the real ingress on both
 * dialects. A pattern token does not take over a worker id that is live under another certificate
 * (or a live session): refused with a stable code and nothing changed, the real worker keeps its
 * session; a token made with `mayReplace` may. A disabled worker is refused as renewal refuses it.
 * A lost enrollment answer is still replayed. And refused enrollments from one address grow the
 * audit log by a bounded number of rows, the rest summed up in one row that says how many.
 */
import { INGRESS_ENROLL_PATH, ingressPath } from '@ql/contracts';
import { changedTables, snapshotDatabase } from '../support/db-snapshot';
import { WorkerCredentials, enrollWorker, issuerEnv } from '../support/enrolled-worker';
import { makeCsr } from '../support/csr';
import { newSessionId, registerBody } from '../support/fixtures';
import {
  Dialect,
  TestDatabase,
  TestPlane,
  createTestDatabase,
  createTestPki,
  readPair,
  startTestPlane,
} from '../support/test-plane';

jest.setTimeout(120_000);

interface AuditRow {
  action: string;
  actor: string;
  target: string;
  detail: Record<string, unknown>;
}

describe.each<Dialect>(['sqlite', 'postgres'])('enrollment against live workers (%s)', (dialect) => {
  let db: TestDatabase;
  let pki: Awaited<ReturnType<typeof createTestPki>>;
  let t: TestPlane;

  beforeAll(async () => {
    db = await createTestDatabase(dialect);
    pki = await createTestPki(['hand-1']);
    t = await startTestPlane(db, pki, { ...issuerEnv(pki), QL_SESSION_LEASE_MS: '600000' });
  });
  afterAll(async () => {
    await t?.close();
    await db?.dispose();
    pki?.remove();
  });

  const snapshot = () => snapshotDatabase(t.plane.core.db);
  const newToken = async (spec: Record<string, unknown>) => {
    const res = await t.admin('POST', '/api/v1/enrollment-tokens', spec);
    expect(res.status).toBe(201);
    return res.body as { id: string; token: string; mayReplace: boolean };
  };
  const enroll = async (workerId: string, token: string, csrPem?: string) =>
    t.ingress(null, INGRESS_ENROLL_PATH, { workerId, token, csr: csrPem ?? (await makeCsr()).csrPem });

  /** A registered session of `workerId` with `credentials`, and a heartbeat on it that answers its status. */
  async function liveSession(workerId: string, credentials: { certPem: string; keyPem: string }) {
    const sessionId = newSessionId();
    const res = await t.ingress(credentials, ingressPath(workerId, sessionId, 'register'), registerBody());
    expect(res.status).toBe(200);
    let { generation, version } = res.body as { generation: number; version: number };
    return {
      heartbeat: async () => {
        const beat = await t.ingress(credentials, ingressPath(workerId, sessionId, 'heartbeat'), {
          generation,
          expectedVersion: version,
          availableSlots: 1,
        });
        if (beat.status === 200)
          ({ generation, version } = beat.body as { generation: number; version: number });
        return beat.status;
      },
    };
  }

  /** Refused with `status` and `code`; nothing changed but (at most) the audit log. */
  async function expectRefused(workerId: string, token: string, status: number, code: string) {
    const before = await snapshot();
    const res = await enroll(workerId, token);
    expect({ status: res.status, body: res.body }).toEqual({
      status,
      body: { code, message: expect.any(String) },
    });
    expect(changedTables(before, await snapshot())).toEqual(['audit_log']);
  }

  it('a pattern token is refused for an id live under another certificate; the worker keeps its session and certificate', async () => {
    const real: WorkerCredentials = await enrollWorker(t, 'pool-1');
    const session = await liveSession('pool-1', real);
    const pattern = await newToken({ pattern: 'pool-*', count: 5 });
    expect(pattern.mayReplace).toBe(false);
    await expectRefused('pool-1', pattern.token, 409, 'enrollment_token_may_not_replace');
    expect((await t.plane.core.repositories.workerCertificates.current('pool-1'))?.fingerprint).toBe(
      real.fingerprint,
    );
    expect(await session.heartbeat()).toBe(200);
    // The token was not used up: it still enrolls an id nobody holds.
    expect((await enroll('pool-2', pattern.token)).status).toBe(200);
  });

  it('an id with a live session but no certificate issued here (a hand-made one) is refused too', async () => {
    const session = await liveSession('hand-1', readPair(pki.workers['hand-1']!));
    const pattern = await newToken({ pattern: 'hand-*', count: 1 });
    await expectRefused('hand-1', pattern.token, 409, 'enrollment_token_may_not_replace');
    expect(await session.heartbeat()).toBe(200);
  });

  it('a pattern token made with mayReplace enrolls a live id: its certificate becomes the current one', async () => {
    await enrollWorker(t, 'pool-3');
    const replacing = await newToken({ pattern: 'pool-*', count: 1, mayReplace: true });
    expect(replacing.mayReplace).toBe(true);
    const res = await enroll('pool-3', replacing.token);
    expect(res.status).toBe(200);
    expect((await t.plane.core.repositories.workerCertificates.current('pool-3'))?.fingerprint).toBe(
      (res.body as { fingerprint: string }).fingerprint,
    );
    const [created] = await t.plane.core.repositories.audit
      .list(10)
      .then((rows) => rows.filter((r) => r.action === 'enrollment_token.create'));
    expect(created).toMatchObject({ detail: { pattern: 'pool-*', mayReplace: true } });
  });

  it('mayReplace is refused with a worker id, and anything but a boolean, changing nothing', async () => {
    const before = await snapshot();
    for (const body of [
      { workerId: 'pool-4', mayReplace: true },
      { pattern: 'pool-*', count: 1, mayReplace: 'yes' },
    ]) {
      const res = await t.admin('POST', '/api/v1/enrollment-tokens', body);
      expect(res).toMatchObject({ status: 400, body: { code: 'invalid_request' } });
    }
    expect(await snapshot()).toEqual(before);
  });

  it('a disabled worker is refused, with a token for its id or a replacing pattern; the token stays unused', async () => {
    const credentials = await enrollWorker(t, 'off-1');
    await liveSession('off-1', credentials);
    expect((await t.admin('POST', '/api/v1/workers/off-1/disable')).status).toBe(200);
    const forId = await newToken({ workerId: 'off-1' });
    await expectRefused('off-1', forId.token, 403, 'worker_disabled');
    const replacing = await newToken({ pattern: 'off-*', count: 1, mayReplace: true });
    await expectRefused('off-1', replacing.token, 403, 'worker_disabled');
    expect((await t.admin('POST', '/api/v1/workers/off-1/enable')).status).toBe(200);
    expect((await enroll('off-1', forId.token)).status).toBe(200);
  });

  it('a lost answer of a pattern enrollment is still replayed for the same key, though the id now has that certificate', async () => {
    const pattern = await newToken({ pattern: 'lost-*', count: 2 });
    const { csrPem } = await makeCsr();
    const first = await enroll('lost-1', pattern.token, csrPem);
    expect(first.status).toBe(200);
    const again = await enroll('lost-1', pattern.token, csrPem);
    expect(again).toMatchObject({ status: 200, body: first.body as object });
    // Another key is no replay: the id is enrolled with this token already.
    await expectRefused('lost-1', pattern.token, 409, 'enrollment_token_used');
  });
});

describe.each<Dialect>(['sqlite', 'postgres'])('refused enrollments in the audit log (%s)', (dialect) => {
  let db: TestDatabase;
  let pki: Awaited<ReturnType<typeof createTestPki>>;

  beforeAll(async () => {
    db = await createTestDatabase(dialect);
    pki = await createTestPki([]);
  });
  afterAll(async () => {
    await db?.dispose();
    pki?.remove();
  });

  const REFUSALS = 30;

  it(`${REFUSALS} refusals from one address write one row, and one summary that counts the rest when the listener closes`, async () => {
    // The default rows per window (1) and window (10 min): the whole burst falls in one window.
    const t = await startTestPlane(db, pki, { ...issuerEnv(pki), QL_ENROLL_AUDIT_ROWS: '1' });
    let before: number;
    try {
      const router1 = (await t.admin('POST', '/api/v1/enrollment-tokens', { workerId: 'router-1' })).body as {
        token: string;
      };
      before = (await snapshotDatabase(t.plane.core.db)).audit_log!.length;
      const csr = (await makeCsr()).csrPem;
      const codes: string[] = [];
      for (let i = 0; i < REFUSALS; i++) {
        const body =
          i % 3 === 0
            ? { workerId: `probe-${i}`, token: `qlet_${'A'.repeat(43)}`, csr } // unknown token
            : i % 3 === 1
              ? { workerId: 'router-2', token: router1.token, csr } // another id's token
              : { workerId: 'router-1', token: router1.token, csr: 'not a csr' };
        const res = await t.ingress(null, INGRESS_ENROLL_PATH, body);
        codes.push((res.body as { code: string }).code);
      }
      expect(new Set(codes)).toEqual(
        new Set(['enrollment_token_invalid', 'enrollment_token_wrong_worker', 'csr_refused']),
      );
      // One row for the whole burst.
      expect((await snapshotDatabase(t.plane.core.db)).audit_log!.length - before).toBe(1);
    } finally {
      await t.close();
    }
    // Read back through a new plane on the same database: the summary was written at close.
    const reader = await startTestPlane(db, pki, {}, { seedKeys: false });
    try {
      const rows = (await reader.plane.core.repositories.audit.list(10)) as unknown as AuditRow[];
      const refusals = rows.filter((r) => /refuse/.test(r.action));
      expect(refusals.map((r) => r.action)).toEqual(['enrollment.refuse_summary', 'enrollment_token.refuse']);
      const [summary, first] = refusals as [AuditRow, AuditRow];
      expect(first.detail).toMatchObject({ code: 'enrollment_token_invalid', address: expect.any(String) });
      expect(summary).toMatchObject({
        actor: `address:${first.detail.address as string}`,
        detail: {
          address: first.detail.address,
          refused: REFUSALS - 1,
          codes: { enrollment_token_invalid: 9, enrollment_token_wrong_worker: 10, csr_refused: 10 },
        },
      });
    } finally {
      await reader.close();
    }
  });
});
