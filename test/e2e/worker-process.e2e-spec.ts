import { join } from 'node:path';
import { ingressPath, WORKER_EXIT } from '@ql/contracts';
import { WorkerProcess } from '../support/worker-process';
import { newSessionId, registerBody } from '../support/fixtures';
import {
  TestDatabase,
  TestPlane,
  createTestDatabase,
  createTestPki,
  readPair,
  startTestPlane,
} from '../support/test-plane';

interface WorkerView {
  workerId: string;
  status: string;
  sessionId: string;
  generation: number;
  version: number;
}

describe('headless worker process against a real control plane (SQLite)', () => {
  let db: TestDatabase;
  let pki: Awaited<ReturnType<typeof createTestPki>>;
  let t: TestPlane;
  let workers: WorkerProcess[] = [];

  beforeAll(async () => {
    db = await createTestDatabase('sqlite');
    pki = await createTestPki(['worker-a', 'worker-b']);
    t = await startTestPlane(db, pki, { QL_SESSION_LEASE_MS: '5000' });
  });
  afterEach(async () => {
    for (const w of workers.filter((w) => w.running)) {
      w.kill('SIGKILL');
      await w.exited;
    }
    workers = [];
  });
  afterAll(async () => {
    await t?.close();
    await db?.dispose();
    pki?.remove();
  });

  const startWorker = (workerId: string, env: Record<string, string> = {}) => {
    const w = new WorkerProcess({
      QL_PROFILE: 'worker',
      QL_WORKER_ID: workerId,
      QL_WORKER_CONTROL_PLANE_URL: t.plane.ingressUrl,
      QL_WORKER_TLS_CA: pki.caCertPath,
      QL_WORKER_TLS_CERT: pki.workers[workerId]!.certPath,
      QL_WORKER_TLS_KEY: pki.workers[workerId]!.keyPath,
      QL_WORKER_HEARTBEAT_MS: '200',
      QL_WORKER_LOG_LEVEL: 'debug',
      QL_WORKER_LABELS: 'zone=secret-zone-value',
      // The journal and work folders stay out of the repository (the defaults are under ./var).
      QL_WORKER_JOURNAL_DIR: join(pki.dir, 'worker', workerId, 'journal'),
      QL_WORKER_WORK_DIR: join(pki.dir, 'worker', workerId, 'runs'),
      ...env,
    });
    workers.push(w);
    return w;
  };
  const view = async (workerId: string): Promise<WorkerView | undefined> => {
    const res = await t.admin('GET', `/api/v1/workers/${workerId}`);
    return res.status === 200 ? (res.body as WorkerView) : undefined;
  };
  const registeredSession = (w: WorkerProcess) =>
    w.lines.find((l) => l.msg === 'worker registered')?.sessionId as string | undefined;

  it('registers, heartbeats, and on SIGTERM drains, goes offline and exits 0', async () => {
    const w = startWorker('worker-a');
    const online = await w.until('worker-a online with version >= 2', async () => {
      const v = await view('worker-a');
      return v && v.status === 'online' && v.version >= 2 ? v : undefined;
    });
    expect(online).toMatchObject({ generation: 1, sessionId: registeredSession(w) });

    w.kill('SIGTERM');
    const exit = await w.exited;
    expect({ ...exit, stderr: w.stderr }).toEqual({ code: WORKER_EXIT.ok, signal: null, stderr: [] });
    const after = await view('worker-a');
    expect(after).toMatchObject({ status: 'offline', generation: 1, sessionId: online.sessionId });
    expect(after!.version).toBeGreaterThan(online.version);
    const messages = w.messages();
    expect(messages.indexOf('worker stopping')).toBeLessThan(messages.indexOf('worker draining'));
    expect(messages.indexOf('worker draining')).toBeLessThan(messages.indexOf('worker offline'));
    expect(messages[messages.length - 1]).toBe('worker stopped');
    // Logs are JSON lines with ids, and never carry key material or label values.
    expect(w.lines.every((l) => typeof l.time === 'string' && typeof l.level === 'string')).toBe(true);
    expect(w.transcript()).not.toMatch(/PRIVATE KEY|secret-zone-value/);
  });

  it('an admin drain reaches the running worker in its next heartbeat: it reports capacity 0, keeps heartbeating, and SIGTERM still exits 0', async () => {
    const w = startWorker('worker-a');
    await w.until('worker-a online', async () => {
      const v = await view('worker-a');
      return v && v.status === 'online' && v.sessionId === registeredSession(w) ? v : undefined;
    });
    const drained = await t.admin('POST', '/api/v1/workers/worker-a/drain');
    expect(drained.body).toMatchObject({ status: 'draining', availableSlots: 0 });
    const drainedAt = (drained.body as WorkerView).version;

    // Two beats accepted after the drain: the session is not fenced, and the worker now sends 0 slots.
    const later = await w.until('two heartbeats after the drain', async () => {
      const v = await view('worker-a');
      return v && v.version >= drainedAt + 2 ? v : undefined;
    });
    expect(later).toMatchObject({ status: 'draining', availableSlots: 0, sessionId: registeredSession(w) });
    expect(w.running).toBe(true);
    expect(w.lines.some((l) => l.level === 'error')).toBe(false);

    w.kill('SIGTERM');
    expect(await w.exited).toEqual({ code: WORKER_EXIT.ok, signal: null });
    expect(await view('worker-a')).toMatchObject({ status: 'offline', sessionId: registeredSession(w) });
  });

  it('when a new session replaces it, the next heartbeat is fenced and the worker exits non-zero without re-registering', async () => {
    const w = startWorker('worker-b');
    const first = await w.until('worker-b online', async () => {
      const v = await view('worker-b');
      return v && v.status === 'online' && v.version >= 1 ? v : undefined;
    });
    expect(first.sessionId).toBe(registeredSession(w));

    const replacement = newSessionId();
    const res = await t.ingress(
      readPair(pki.workers['worker-b']!),
      ingressPath('worker-b', replacement, 'register'),
      registerBody(),
    );
    expect(res.body).toMatchObject({ outcome: 'replaced', generation: first.generation + 1 });

    const exit = await w.exited; // by itself: nobody signals it
    expect(exit).toEqual({ code: WORKER_EXIT.fenced, signal: null });
    expect(w.lines.find((l) => l.level === 'error' && l.msg?.includes('fenced'))).toMatchObject({
      code: 'worker_session_fenced',
      reason: 'session_replaced',
    });
    expect(w.messages().filter((m) => m === 'worker registered')).toHaveLength(1);
    // The replacement session is untouched: same generation and version as its registration answered.
    const registered = res.body as { generation: number; version: number };
    expect(await view('worker-b')).toMatchObject({
      sessionId: replacement,
      generation: registered.generation,
      version: registered.version,
      status: 'online',
    });
  });

  it('refuses to run without QL_PROFILE=worker', async () => {
    const w = startWorker('worker-a', { QL_PROFILE: 'standalone' });
    expect(await w.exited).toEqual({ code: WORKER_EXIT.config, signal: null });
    expect(w.stderr.join('\n')).toMatch(/QL_PROFILE is "standalone"; set QL_PROFILE=worker/);
    expect(w.lines).toEqual([]);
  });
});
