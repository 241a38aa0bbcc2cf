import { AnswerCutter } from '../support/answer-cutter';
import { EntryPoint, WORKER, tempDir } from '../support/entry-points';
import {
  TestDatabase,
  TestPlane,
  createTestDatabase,
  createTestPki,
  startTestPlane,
} from '../support/test-plane';

const LEASE_MS = 5_000; // the shortest session lease the control plane accepts

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
    pki = await createTestPki(['worker-a', 'worker-b']);
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

  const startWorker = (workerId: string, origins: string[]) => {
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
      { deadlineMs: 4 * LEASE_MS },
    );

    expect(after).toMatchObject({
      status: 'online',
      sessionId: online.sessionId,
      generation: online.generation,
    });
    expect(after!.version).toBeGreaterThan(online.version + 10);
    expect(Date.parse(after!.leaseExpiresAt)).toBeGreaterThan(Date.now());
    expect(w.running).toBe(true);
    expect(registrations(w)).toHaveLength(1);
    expect(w.lines.filter((l) => l.level === 'error')).toEqual([]);
  });
});
