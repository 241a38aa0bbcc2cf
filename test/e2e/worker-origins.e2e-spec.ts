import { AnswerCutter } from '../support/answer-cutter';
import { EntryPoint, WORKER, freePort, tempDir } from '../support/entry-points';
import { WORKER_EXIT } from '@ql/contracts';
import {
  TestDatabase,
  TestPlane,
  createTestDatabase,
  createTestPki,
  startTestPlane,
} from '../support/test-plane';

const LEASE_MS = 5_000; // the shortest session lease the control plane accepts

// Real worker processes beside two replicas in this process: seconds per step on a loaded machine.
jest.setTimeout(120_000);
const FAILOVER = 'control plane origin changed';
/** The warnings of a failing pull or heartbeat loop (issue 16 item 11). */
const LOOP_WARNINGS = ['pull failed', 'pull still failing', 'heartbeat failed', 'heartbeat still failing'];

interface WorkerView {
  status: string;
  sessionId: string;
  generation: number;
  version: number;
  leaseExpiresAt: string;
}

/**
 * R-WRK-7 / ADR 0012: a real worker process given two control-plane replicas on one PostgreSQL keeps
 * its session when an answer is lost and when the replica it uses is gone for longer than a lease.
 */
describe('a worker with two control-plane origins (PostgreSQL replicas)', () => {
  let db: TestDatabase;
  let pki: Awaited<ReturnType<typeof createTestPki>>;
  let a: TestPlane;
  let b: TestPlane;
  let cutter: AnswerCutter;
  let aStopped = false;
  let workers: EntryPoint[] = [];

  beforeAll(async () => {
    db = await createTestDatabase('postgres');
    pki = await createTestPki(['worker-a', 'worker-b', 'worker-c', 'worker-d']);
    const env = { QL_SESSION_LEASE_MS: String(LEASE_MS) };
    a = await startTestPlane(db, pki, env);
    b = await startTestPlane(db, pki, env);
    cutter = await AnswerCutter.start(a.plane.ingressUrl);
  });
  afterEach(async () => {
    for (const w of workers.filter((w) => w.running)) {
      w.kill('SIGKILL');
      await w.exited;
    }
    workers = [];
  });
  afterAll(async () => {
    await cutter?.close();
    if (!aStopped) await a?.close();
    await b?.close();
    await db?.dispose();
    pki?.remove();
  });

  const startWorker = (workerId: string, origins: string[], extra: Record<string, string> = {}) => {
    const home = tempDir(`ql-origins-${workerId}-`);
    const w = new EntryPoint(WORKER, {
      QL_PROFILE: 'worker',
      QL_WORKER_ID: workerId,
      QL_WORKER_CONTROL_PLANE_URL: origins.join(','),
      QL_WORKER_TLS_CA: pki.caCertPath,
      QL_WORKER_TLS_CERT: pki.workers[workerId]!.certPath,
      QL_WORKER_TLS_KEY: pki.workers[workerId]!.keyPath,
      QL_WORKER_HEARTBEAT_MS: '200',
      QL_WORKER_REQUEST_TIMEOUT_MS: '4000',
      QL_WORKER_JOURNAL_DIR: `${home}/journal`,
      QL_WORKER_WORK_DIR: `${home}/runs`,
      QL_WORKER_LOG_LEVEL: 'debug',
      // One socket per origin: what these tests count. A held long-poll pull has a socket of its own.
      QL_WORKER_PULL_WAIT_MS: '0',
      ...extra,
    });
    workers.push(w);
    return w;
  };
  const view = async (plane: TestPlane, workerId: string): Promise<WorkerView | undefined> => {
    const res = await plane.admin('GET', `/api/v1/workers/${workerId}`);
    return res.status === 200 ? (res.body as WorkerView) : undefined;
  };
  /** The worker's session as `plane` sees it, once its version reached `version`. */
  const atVersion = (w: EntryPoint, plane: TestPlane, workerId: string, version: number) =>
    w.until(`${workerId} online at version >= ${version}`, async () => {
      const v = await view(plane, workerId);
      return v && v.status === 'online' && v.version >= version ? v : undefined;
    });
  const registrations = (w: EntryPoint) => w.messages().filter((m) => m === 'worker registered');

  it('an answer lost after the replica committed: the same call goes to the other replica, which answers it; the session goes on', async () => {
    const w = startWorker('worker-a', [cutter.origin, b.plane.ingressUrl]);
    const online = await atVersion(w, b, 'worker-a', 3);
    expect(cutter.connections).toBe(1); // it uses replica A, through the relay

    cutter.cutNextAnswer();
    await w.until('an answer lost', async () => (cutter.cuts === 1 ? true : undefined));
    const after = await atVersion(w, b, 'worker-a', online.version + 5);

    expect(after).toMatchObject({ sessionId: online.sessionId, generation: online.generation });
    expect(cutter.connections).toBe(1); // it stayed with replica B, the one that answered
    // One line says so, naming both origins and what failed on the first one.
    const failovers = w.lines.filter((l) => l.msg === FAILOVER);
    expect(failovers).toEqual([
      expect.objectContaining({ level: 'warn', from: cutter.origin, to: b.plane.ingressUrl }),
    ]);
    expect(failovers[0]!.cause).toContain(`${cutter.origin} (`);
    expect(w.running).toBe(true);
    expect(registrations(w)).toHaveLength(1);
    expect(w.lines.filter((l) => l.level === 'error')).toEqual([]);
  });

  it('the replica it uses stops for longer than a session lease: the worker keeps its session through the other', async () => {
    const w = startWorker('worker-b', [a.plane.ingressUrl, b.plane.ingressUrl]);
    const online = await atVersion(w, b, 'worker-b', 3);

    await a.close();
    aStopped = true;
    const stoppedAt = Date.now();
    // Heartbeats go on through B until well past the lease the last heartbeat on A granted.
    const after = await w.until(
      'two session leases after replica A stopped',
      async () => {
        const v = await view(b, 'worker-b');
        return Date.now() - stoppedAt > 2 * LEASE_MS ? v : undefined;
      },
      // The wait is 2 leases; the deadline only bounds a hang (the replicas share this loaded process).
      { deadlineMs: 12 * LEASE_MS },
    );

    expect(after).toMatchObject({
      status: 'online',
      sessionId: online.sessionId,
      generation: online.generation,
    });
    expect(after!.version).toBeGreaterThan(online.version + 10);
    // Heartbeats and pulls both moved, but the change of origin is logged once, with A's error.
    expect(w.lines.filter((l) => l.msg === FAILOVER)).toEqual([
      expect.objectContaining({
        level: 'warn',
        from: a.plane.ingressUrl,
        to: b.plane.ingressUrl,
        cause: expect.stringContaining(`${a.plane.ingressUrl} (`),
      }),
    ]);
    expect(Date.parse(after!.leaseExpiresAt)).toBeGreaterThan(Date.now());
    expect(w.running).toBe(true);
    expect(registrations(w)).toHaveLength(1);
    expect(w.lines.filter((l) => l.level === 'error')).toEqual([]);
  });

  it('every origin down for seconds: a bounded number of warnings, each naming every origin and its error; one recovery line', async () => {
    // A replica with a long session lease, so the session outlives the outage; reached through a relay that can go down.
    const c = await startTestPlane(db, pki, { QL_SESSION_LEASE_MS: '60000' });
    const relay = await AnswerCutter.start(c.plane.ingressUrl);
    const dead = `https://127.0.0.1:${await freePort()}`; // nothing listens there
    try {
      const w = startWorker('worker-c', [relay.origin, dead], { QL_WORKER_PULL_INTERVAL_MS: '200' });
      await atVersion(w, c, 'worker-c', 3);
      const before = w.lines.length;

      relay.refuse(true);
      const downAt = Date.now();
      // The outage is the point: a heartbeat and a pull fail every 200 ms for at least 8 s (~80 failed calls).
      await w.until('8 s of outage', async () => (Date.now() - downAt > 8_000 ? true : undefined), {
        deadlineMs: 30_000,
        pollMs: 250,
      });
      const downForMs = Date.now() - downAt;
      const outage = w.lines.slice(before);
      const warnings = outage.filter((l) => LOOP_WARNINGS.includes(String(l.msg)));
      // Per loop: the first failure, then summaries 1 s, 2 s, 4 s … apart: at most 2 + log2(seconds + 1)
      // lines each (a loaded machine only makes fewer). One line per failed call would be ~80.
      const perLoop = 2 + Math.floor(Math.log2(downForMs / 1000 + 1));
      expect(warnings.length).toBeGreaterThanOrEqual(2); // at least the first failure of each loop
      expect(warnings.length).toBeLessThanOrEqual(2 * perLoop);
      expect(warnings.map((l) => l.msg)).toEqual(expect.arrayContaining(['pull failed', 'heartbeat failed']));
      for (const line of warnings) {
        expect(line).toMatchObject({ level: 'warn', code: 'control_plane_unavailable' });
        expect(line.detail).toContain(`${relay.origin} (transport_error`);
        expect(line.detail).toContain(`${dead} (transport_error ECONNREFUSED)`);
      }
      expect(outage.filter((l) => l.msg === FAILOVER)).toEqual([]); // no origin answered: nothing moved

      relay.refuse(false);
      await w.until('both loops recovered', async () =>
        ['pull recovered', 'heartbeat recovered'].every((m) => w.messages().includes(m)) ? true : undefined,
      );
      const recovered = w.lines.filter((l) => String(l.msg).endsWith(' recovered'));
      expect(recovered).toHaveLength(2); // once each
      expect(recovered.every((l) => l.level === 'info' && Number(l.failures) > 1)).toBe(true);
      expect(w.running).toBe(true);
      expect(registrations(w)).toHaveLength(1);
    } finally {
      await relay.close();
      await c.close();
    }
  });

  it('started before its control plane answers, the worker waits (register sent again, one warning), registers once it answers; SIGTERM while it waits exits 0', async () => {
    const c = await startTestPlane(db, pki, { QL_SESSION_LEASE_MS: '60000' });
    const relay = await AnswerCutter.start(c.plane.ingressUrl);
    try {
      relay.refuse(true);
      const w = startWorker('worker-d', [relay.origin], { QL_WORKER_REQUEST_TIMEOUT_MS: '1000' });
      await w.until('register still failing', async () =>
        w.messages().includes('register still failing') ? true : undefined,
      );
      expect(w.running).toBe(true); // before: exit 1, "worker failed to start"
      expect(w.messages().filter((m) => m === 'register failed')).toHaveLength(1);
      relay.refuse(false);
      const online = await atVersion(w, c, 'worker-d', 1);
      expect(registrations(w)).toHaveLength(1);
      expect(w.lines.find((l) => l.msg === 'register recovered')).toMatchObject({ level: 'info' });
      expect(online.status).toBe('online');

      const waiting = startWorker('worker-c', [`https://127.0.0.1:${await freePort()}`]);
      await waiting.until('register failed', async () =>
        waiting.messages().includes('register failed') ? true : undefined,
      );
      waiting.kill('SIGTERM');
      expect(await waiting.exited).toEqual({ code: WORKER_EXIT.ok, signal: null });
      expect(waiting.messages()).toContain('worker stopped before it registered');
      expect(registrations(waiting)).toEqual([]);
    } finally {
      await relay.close();
      await c.close();
    }
  });
});
