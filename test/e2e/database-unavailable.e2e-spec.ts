import { randomBytes } from 'node:crypto';
import Database from 'better-sqlite3';
import { ingressPath } from '@ql/contracts';
import { TestPostgresDatabase, createPostgresDatabase, withAdminClient } from '../support/databases';
import { newSessionId, registerBody } from '../support/fixtures';
import { PostgresProxy } from '../support/postgres-proxy';
import {
  HttpResult,
  TestDatabase,
  TestPlane,
  createTestDatabase,
  createTestPki,
  readPair,
  startTestPlane,
} from '../support/test-plane';

/**
 * R-ADM-2: a database the control plane cannot use is 503 `unavailable` with Retry-After on the
 * admin listener (never 500), and 503 `worker_ingress_unavailable` on the ingress; once it is back
 * the app serves again without a restart.
 */

const key = () => `outage-${randomBytes(6).toString('hex')}`;

function expectUnavailable(what: string, res: HttpResult): void {
  expect({
    what,
    status: res.status,
    type: res.headers['content-type'],
    code: (res.body as { code?: string }).code,
    retryAfter: res.headers['retry-after'],
  }).toEqual({
    what,
    status: 503,
    type: expect.stringContaining('application/problem+json'),
    code: 'unavailable',
    retryAfter: expect.stringMatching(/^[1-9][0-9]*$/),
  });
}

interface Fixture {
  t: TestPlane;
  pki: Awaited<ReturnType<typeof createTestPki>>;
  taskId: string;
  sessionId: string;
}

async function startFixture(db: TestDatabase, env: Record<string, string> = {}): Promise<Fixture> {
  const pki = await createTestPki(['worker-a']);
  const t = await startTestPlane(db, pki, env);
  const sessionId = newSessionId();
  const reg = await t.ingress(
    readPair(pki.workers['worker-a']!),
    ingressPath('worker-a', sessionId, 'register'),
    registerBody(),
  );
  expect(reg.status).toBe(200);
  const task = await t.admin('POST', '/api/v1/tasks', { name: 'outage', command: 'true', runtime: 'shell' });
  expect(task.status).toBe(201);
  return { t, pki, taskId: (task.body as { id: string }).id, sessionId };
}

const trigger = (f: Fixture, idempotencyKey: string) =>
  f.t.admin('POST', `/api/v1/tasks/${f.taskId}/runs`, {}, undefined, {
    headers: { 'idempotency-key': idempotencyKey },
  });
const heartbeat = (f: Fixture) =>
  f.t.ingress(readPair(f.pki.workers['worker-a']!), ingressPath('worker-a', f.sessionId, 'heartbeat'), {
    generation: 1,
    expectedVersion: 0,
    availableSlots: 4,
  });

/** The admin calls of the incident report (list runs, trigger a run, create an API key) and the ingress. */
async function expectAllUnavailable(f: Fixture, idempotencyKey: string): Promise<void> {
  expectUnavailable('GET /api/v1/runs', await f.t.admin('GET', '/api/v1/runs'));
  expectUnavailable('POST /api/v1/tasks/:taskId/runs', await trigger(f, idempotencyKey));
  expectUnavailable(
    'POST /api/v1/api-keys',
    await f.t.admin('POST', '/api/v1/api-keys', { name: 'during-outage', role: 'viewer' }),
  );
  const ingress = await heartbeat(f);
  expect({ status: ingress.status, body: ingress.body, retryAfter: ingress.headers['retry-after'] }).toEqual({
    status: 503,
    body: expect.objectContaining({ code: 'worker_ingress_unavailable' }),
    retryAfter: expect.stringMatching(/^[1-9][0-9]*$/),
  });
}

/** Served again; the trigger refused during the outage wrote nothing, so its key makes a new run. */
async function expectServedAgain(f: Fixture, idempotencyKey: string): Promise<void> {
  expect((await f.t.admin('GET', '/api/v1/runs')).status).toBe(200);
  const again = await trigger(f, idempotencyKey);
  expect({ status: again.status, created: (again.body as { created?: boolean }).created }).toEqual({
    status: 201,
    created: true,
  });
  expect((await f.t.admin('POST', '/api/v1/api-keys', { name: 'after', role: 'viewer' })).status).toBe(201);
  expect((await heartbeat(f)).status).not.toBe(503);
}

describe('PostgreSQL goes away under a running control plane', () => {
  let database: TestPostgresDatabase;
  let proxy: Awaited<ReturnType<typeof PostgresProxy.start>>;
  let f: Fixture;

  beforeAll(async () => {
    database = await createPostgresDatabase();
    proxy = await PostgresProxy.start(database.url);
    f = await startFixture({ dialect: 'postgres', url: proxy.url, dispose: async () => undefined });
  });
  afterEach(() => proxy.up());
  afterAll(async () => {
    await f?.t.close();
    await proxy?.down();
    await database?.drop();
    f?.pki.remove();
  });

  it('connections refused (ECONNREFUSED): 503 unavailable with Retry-After, then served again', async () => {
    const k = key();
    await proxy.down();
    await expectAllUnavailable(f, k);
    expect((await f.t.admin('GET', '/readyz', undefined, null)).status).toBe(503);
    await proxy.up();
    await expectServedAgain(f, k);
  });

  it('the server is shutting down (57P03 cannot_connect_now): 503, then served again', async () => {
    const k = key();
    proxy.shutDown();
    await expectAllUnavailable(f, k);
    await proxy.up();
    await expectServedAgain(f, k);
  });

  it('a trigger whose backend is terminated mid-transaction (57P01 admin_shutdown) is 503, and wrote nothing', async () => {
    const k = key();
    await withAdminClient(database.url, async (blocker) => {
      // Writes to runs wait on this lock; reads (the key lookup, the idempotency lookup) do not.
      await blocker.query('BEGIN');
      await blocker.query('LOCK TABLE runs IN EXCLUSIVE MODE');
      let answered = false;
      const pending = trigger(f, k).finally(() => (answered = true));
      let pid: number | undefined;
      while (pid === undefined && !answered) {
        const waiting = await blocker.query<{ pid: number }>(
          // Every test database is a copy of one template: the same OID names runs in each, so filter by database.
          `SELECT pid FROM pg_locks
           WHERE database = (SELECT oid FROM pg_database WHERE datname = current_database())
             AND relation = 'runs'::regclass AND mode = 'RowExclusiveLock' AND NOT granted`,
        );
        pid = waiting.rows[0]?.pid;
      }
      expect(pid).toEqual(expect.any(Number));
      await blocker.query('SELECT pg_terminate_backend($1)', [pid]);
      expectUnavailable('POST /api/v1/tasks/:taskId/runs', await pending);
      await blocker.query('ROLLBACK');
    });
    await expectServedAgain(f, k);
  });
});

describe('SQLite stays locked by another process', () => {
  let db: TestDatabase;
  let f: Fixture;

  beforeAll(async () => {
    db = await createTestDatabase('sqlite');
    f = await startFixture(db, { QL_SQLITE_BUSY_RETRIES: '3' });
  });
  afterAll(async () => {
    await f?.t.close();
    await db?.dispose();
    f?.pki.remove();
  });

  it('a write that stays SQLITE_BUSY after its retries is 503 unavailable with Retry-After; reads go on', async () => {
    const other = new Database(db.url.slice('sqlite:'.length));
    const k = key();
    try {
      other.exec('BEGIN IMMEDIATE');
      expectUnavailable('POST /api/v1/tasks/:taskId/runs', await trigger(f, k));
      expectUnavailable(
        'POST /api/v1/api-keys',
        await f.t.admin('POST', '/api/v1/api-keys', { name: 'during-lock', role: 'viewer' }),
      );
      expect((await heartbeat(f)).body).toMatchObject({ code: 'worker_ingress_unavailable' });
      // WAL: readers are not blocked by the writer.
      expect((await f.t.admin('GET', '/api/v1/runs')).status).toBe(200);
      other.exec('ROLLBACK');
    } finally {
      other.close();
    }
    await expectServedAgain(f, k);
  });
});
