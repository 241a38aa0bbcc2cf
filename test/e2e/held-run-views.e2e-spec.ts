// Size: a held run seen from outside over the real listeners: its output read back through the admin
// logs route (pages, tail end, truncation, the long-poll tail) and its cancel request in its session's
// heartbeat answer, on one running app per dialect (the last test shuts it down under a waiting tail).
import { request as httpRequest } from 'node:http';
import { leaseTokenDigest } from '@ql/domain';
import { IngressAction, ingressPath } from '@ql/contracts';
import { snapshotDatabase } from '../support/db-snapshot';
import { newSessionId, registerBody } from '../support/fixtures';
import {
  IngressSession as Session,
  leaseFence as fenceOf,
  pullNewRun,
  startHeldRun,
} from '../support/lease-holder';
import {
  Dialect,
  TestDatabase,
  TestPlane,
  createTestDatabase,
  createTestPki,
  readPair,
  startTestPlane,
} from '../support/test-plane';

interface LogPage {
  items: {
    position: number;
    attemptId: string;
    seq: number | null;
    kind: string;
    stream: string;
    text: string;
    at: string;
  }[];
  nextAfter: number;
  runEnded: boolean;
  truncated: boolean;
}

/** The smallest QL_RUN_LOG_CAP_BYTES the plane accepts. */
const CAP_BYTES = 64 * 1024;

describe.each<Dialect>(['sqlite', 'postgres'])('a held run over the real listeners (%s)', (dialect) => {
  let db: TestDatabase;
  let pki: Awaited<ReturnType<typeof createTestPki>>;
  let t: TestPlane;
  let a: Session;
  let names = 0;

  const register = async (workerId: string): Promise<Session> => {
    const creds = readPair(pki.workers[workerId]!);
    const sessionId = newSessionId();
    const res = await t.ingress(
      creds,
      ingressPath(workerId, sessionId, 'register'),
      registerBody({ maxConcurrentRuns: 16, availableSlots: 16 }),
    );
    expect(res.status).toBe(200);
    const { generation, version } = res.body as { generation: number; version: number };
    return { workerId, sessionId, creds, generation, version };
  };

  beforeAll(async () => {
    db = await createTestDatabase(dialect);
    pki = await createTestPki(['worker-a', 'worker-b', 'worker-c']);
    t = await startTestPlane(db, pki, {
      QL_INGRESS_RATE_BURST: '100000',
      QL_SESSION_LEASE_MS: '600000',
      QL_RUN_LOG_CAP_BYTES: String(CAP_BYTES),
    });
    a = await register('worker-a');
  });
  let closed = false;
  afterAll(async () => {
    if (!closed) await t?.close();
    await db?.dispose();
    pki?.remove();
  });

  const send = (s: Session, action: IngressAction, body: unknown) =>
    t.ingress(s.creds, ingressPath(s.workerId, s.sessionId, action), body);
  /** A new task's run pulled by `s`, through starting and running: the holder and its lease version. */
  const runningRun = async (s: Session) => {
    const h = await pullNewRun(t, s, `logs ${dialect} ${++names}`);
    const version = await startHeldRun(t, s, h);
    return { h, version, runId: h.offer.run.runId, attemptId: h.offer.run.attemptId };
  };
  const chunk = async (s: Session, r: Awaited<ReturnType<typeof runningRun>>, seq: number, text: string) => {
    const res = await send(s, 'logs', { ...fenceOf(s, r.h, r.version), seq, stream: 'stdout', text });
    expect(res.status).toBe(200);
    return res.body as { outcome: string; truncated: boolean };
  };
  const logs = async (runId: string, query = '') => {
    const res = await t.admin('GET', `/api/v1/runs/${runId}/logs${query}`, undefined, t.viewerToken);
    expect({ status: res.status, type: res.headers['content-type'] }).toEqual({
      status: 200,
      type: expect.stringContaining('application/json'),
    });
    return res.body as LogPage;
  };

  it('chunks come back in order, paged with after=nextAfter; runEnded once the run completed', async () => {
    const r = await runningRun(a);
    for (const [seq, text] of ['one\n', 'two\n', 'three\n'].entries()) await chunk(a, r, seq, text);

    const first = await logs(r.runId, '?limit=2');
    expect(first).toEqual({
      items: [
        {
          position: 1,
          attemptId: r.attemptId,
          seq: 0,
          kind: 'output',
          stream: 'stdout',
          text: 'one\n',
          at: expect.any(String),
        },
        {
          position: 2,
          attemptId: r.attemptId,
          seq: 1,
          kind: 'output',
          stream: 'stdout',
          text: 'two\n',
          at: expect.any(String),
        },
      ],
      nextAfter: 2,
      runEnded: false,
      truncated: false,
    });
    expect(new Date(first.items[0]!.at).toISOString()).toBe(first.items[0]!.at);
    const second = await logs(r.runId, `?after=${first.nextAfter}&limit=2`);
    expect(second.items.map((e) => [e.position, e.text])).toEqual([[3, 'three\n']]);
    expect(second.nextAfter).toBe(3);
    // The tail is caught up but the run is live: an empty page keeps the cursor.
    expect(await logs(r.runId, '?after=3')).toEqual({
      items: [],
      nextAfter: 3,
      runEnded: false,
      truncated: false,
    });

    const done = await send(a, 'completion', {
      ...fenceOf(a, r.h, r.version),
      outcome: 'succeeded',
      exitCode: 0,
    });
    expect(done.status).toBe(200);
    expect(await logs(r.runId, '?after=3')).toEqual({
      items: [],
      nextAfter: 3,
      runEnded: true,
      truncated: false,
    });
    expect((await logs(r.runId)).items.map((e) => e.text)).toEqual(['one\n', 'two\n', 'three\n']);
  });

  it('past the cap one truncation marker is read back and later chunks are not', async () => {
    const r = await runningRun(a);
    const big = 'x'.repeat(40 * 1024);
    expect(await chunk(a, r, 0, big)).toEqual({ outcome: 'stored', truncated: false });
    expect((await chunk(a, r, 1, big)).truncated).toBe(true);
    expect(await chunk(a, r, 2, 'late\n')).toEqual({ outcome: 'dropped', truncated: true });

    const page = await logs(r.runId);
    expect(page.truncated).toBe(true);
    expect(
      page.items.map((e) => ({ position: e.position, seq: e.seq, kind: e.kind, stream: e.stream })),
    ).toEqual([
      { position: 1, seq: 0, kind: 'output', stream: 'stdout' },
      // The control plane's marker is text the task did not write (ADR 0032).
      { position: 2, seq: null, kind: 'truncated', stream: 'system' },
    ]);
    expect(page.items[1]!.text).toContain(`log cap of ${CAP_BYTES} bytes`);
  });

  it('an unknown run is 404 and bad integers are 400 naming the parameter; nothing is written', async () => {
    const before = await snapshotDatabase(t.plane.core.db);
    const unknown = await t.admin('GET', `/api/v1/runs/${newSessionId()}/logs`);
    expect({ status: unknown.status, type: unknown.headers['content-type'] }).toEqual({
      status: 404,
      type: expect.stringContaining('application/problem+json'),
    });
    expect(unknown.body).toMatchObject({ code: 'not_found' });
    const r = (await t.admin('GET', '/api/v1/runs?limit=1')).body as { items: { id: string }[] };
    for (const [query, field] of [
      ['?after=0x10', 'after'],
      ['?after=-1', 'after'],
      ['?limit=0', 'limit'],
      ['?limit=201', 'limit'],
    ]) {
      const res = await t.admin('GET', `/api/v1/runs/${r.items[0]!.id}/logs${query}`);
      expect({ query, status: res.status, body: res.body }).toEqual({
        query,
        status: 400,
        body: expect.objectContaining({
          code: 'invalid_request',
          detail: expect.stringMatching(`^${field}: `),
        }),
      });
    }
    expect(await snapshotDatabase(t.plane.core.db)).toEqual(before);
  });

  it("a cancel requested through the admin API is in the holding session's next heartbeat answer only", async () => {
    const holder = await register('worker-b');
    const other = await register('worker-c');
    const r = await runningRun(holder);
    let version = holder.version;
    /** One heartbeat of `s` at `expectedVersion`: its answer. */
    const beat = async (s: Session, expectedVersion: number) => {
      const res = await send(s, 'heartbeat', {
        generation: s.generation,
        expectedVersion,
        availableSlots: 16,
      });
      expect(res.status).toBe(200);
      return res.body as { version: number; cancelAttemptIds: string[] };
    };
    const quiet = await beat(holder, version);
    expect(quiet.cancelAttemptIds).toEqual([]);
    version = quiet.version;

    const cancel = await t.admin('POST', `/api/v1/runs/${r.runId}/cancel`);
    expect({ status: cancel.status, body: cancel.body }).toEqual({
      status: 200,
      body: expect.objectContaining({ status: 'running', cancelRequested: true }),
    });
    expect((await beat(holder, version)).cancelAttemptIds).toEqual([r.attemptId]);
    expect((await beat(other, other.version)).cancelAttemptIds).toEqual([]);
  });
  describe('the long-poll tail (?wait=)', () => {
    /** Resolves once `n` tails wait in this process: the request is parked, not racing the write. */
    const waiting = async (n: number) => {
      const deadline = Date.now() + 10_000;
      while (t.plane.core.logWaiters.size !== n) {
        if (Date.now() > deadline)
          throw new Error(`expected ${n} waiting tails, have ${t.plane.core.logWaiters.size}`);
        await new Promise((resolve) => setImmediate(resolve));
      }
    };
    /** A tail held `wait=20` s must answer well inside its window once there is something to say. */
    const WELL_INSIDE_MS = 10_000;
    const timed = async <T>(p: Promise<T>) => {
      const start = Date.now();
      const value = await p;
      return { value, ms: Date.now() - start };
    };

    it('returns as soon as a chunk arrives through the ingress, and ends with runEnded when the run completes', async () => {
      const r = await runningRun(a);
      const first = logs(r.runId, '?after=0&wait=20');
      await waiting(1);
      await chunk(a, r, 0, 'tick\n');
      const got = await timed(first);
      expect(got.value.items.map((e) => [e.position, e.text])).toEqual([[1, 'tick\n']]);
      expect(got.value).toMatchObject({ nextAfter: 1, runEnded: false });
      expect(got.ms).toBeLessThan(WELL_INSIDE_MS);

      const last = logs(r.runId, '?after=1&wait=20');
      await waiting(1);
      const done = await send(a, 'completion', {
        ...fenceOf(a, r.h, r.version),
        outcome: 'succeeded',
        exitCode: 0,
      });
      expect(done.status).toBe(200);
      const ended = await timed(last);
      expect(ended.value).toEqual({ items: [], nextAfter: 1, runEnded: true, truncated: false });
      expect(ended.ms).toBeLessThan(WELL_INSIDE_MS);
      expect(t.plane.core.logWaiters.size).toBe(0);
    });

    it('a completion wakes a waiting tail at once, not at its next poll', async () => {
      const r = await runningRun(a);
      // The waits of this process re-poll 20 times slower here (10 s instead of LOG_TAIL_POLL_MS): only
      // the completion's wake can answer the tail in time, whatever the phase of its poll.
      const waiters = t.plane.core.logWaiters;
      const wait = waiters.wait.bind(waiters);
      const slowPolls = jest
        .spyOn(waiters, 'wait')
        .mockImplementation((runId, ms, signal) => wait(runId, ms * 20, signal));
      try {
        let answeredAt = 0;
        const pending = logs(r.runId, '?after=0&wait=20').then((page) => ((answeredAt = Date.now()), page));
        await waiting(1);
        const done = await send(a, 'completion', {
          ...fenceOf(a, r.h, r.version),
          outcome: 'succeeded',
          exitCode: 0,
        });
        const completedAt = Date.now();
        expect(done.status).toBe(200);
        expect(await pending).toEqual({ items: [], nextAfter: 0, runEnded: true, truncated: false });
        // Well under one LOG_TAIL_POLL_MS (500 ms), with room for a loaded machine; without the wake
        // the answer would come 10 s after the tail began to wait.
        expect(answeredAt - completedAt).toBeLessThan(250);
      } finally {
        slowPolls.mockRestore();
      }
    });

    it("sees a chunk no signal announced (another replica's write) by polling the store", async () => {
      const r = await runningRun(a);
      const pending = logs(r.runId, '?wait=20');
      await waiting(1);
      // Straight into the store, as another replica would: this process's tails are not woken.
      const stored = await t.plane.core.repositories.activation.appendLog({
        workerId: a.workerId,
        sessionId: a.sessionId,
        fence: { generation: a.generation, expectedVersion: a.version },
        offerId: r.h.offer.lease.offerId,
        tokenDigest: leaseTokenDigest(r.h.token),
        leaseGeneration: r.h.offer.lease.leaseGeneration,
        leaseVersion: r.version,
        seq: 0,
        stream: 'stdout',
        text: 'elsewhere\n',
      });
      expect(stored.outcome).toBe('stored');
      const got = await timed(pending);
      expect(got.value.items.map((e) => e.text)).toEqual(['elsewhere\n']);
      expect(got.ms).toBeLessThan(WELL_INSIDE_MS);
    });

    it('with nothing new, a tail holds through its polls for the whole wait; a client that goes away stops its wait', async () => {
      const r = await runningRun(a);
      // Several polls (LOG_TAIL_POLL_MS apart) find nothing: the answer comes when the second is over.
      const quiet = await timed(logs(r.runId, '?wait=2'));
      expect(quiet.value).toEqual({ items: [], nextAfter: 0, runEnded: false, truncated: false });
      expect(quiet.ms).toBeGreaterThanOrEqual(1_950);
      expect(await logs(r.runId, '?wait=0')).toEqual({
        items: [],
        nextAfter: 0,
        runEnded: false,
        truncated: false,
      });
      const url = new URL(`/api/v1/runs/${r.runId}/logs?wait=20`, t.plane.adminUrl);
      const req = httpRequest(url, { headers: { authorization: `Bearer ${t.viewerToken}` } });
      req.on('error', () => undefined); // the abort below
      req.end();
      await waiting(1);
      req.destroy();
      await waiting(0);
    });

    it('shutdown answers a waiting tail at once and leaves nothing behind', async () => {
      const r = await runningRun(a);
      const pending = logs(r.runId, '?wait=20');
      await waiting(1);
      closed = true;
      const closing = timed(t.close());
      const got = await timed(pending);
      expect(got.value).toEqual({ items: [], nextAfter: 0, runEnded: false, truncated: false });
      expect(got.ms).toBeLessThan(WELL_INSIDE_MS);
      expect((await closing).ms).toBeLessThan(WELL_INSIDE_MS);
      expect(t.plane.core.logWaiters.size).toBe(0);
    });
  });
});
