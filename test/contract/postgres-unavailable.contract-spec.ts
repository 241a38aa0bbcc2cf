import { HeartbeatBatcher, UnavailableError } from '@ql/domain';
import { createIdGenerator } from '@ql/contracts';
import { PostgresDatabase, SqlDatabase, SqlWorkerSessionRepository } from '@ql/persistence';
import { newSessionId } from '../support/fixtures';
import { TestPostgresDatabase, createPostgresDatabase, withAdminClient } from '../support/databases';
import { PostgresProxy } from '../support/postgres-proxy';

/**
 * The PostgreSQL adapter turns every way of losing the server into one UnavailableError (503 on both
 * listeners), and recovers by itself once the server is back.
 */
describe('PostgreSQL adapter: an unreachable server is UnavailableError', () => {
  let database: TestPostgresDatabase;
  let proxy: Awaited<ReturnType<typeof PostgresProxy.start>>;
  let db: PostgresDatabase;

  beforeAll(async () => {
    database = await createPostgresDatabase();
    proxy = await PostgresProxy.start(database.url);
    db = await PostgresDatabase.open({ url: proxy.url, poolSize: 2, connectTimeoutMs: 300 }, false);
  });
  afterEach(() => proxy.up());
  afterAll(async () => {
    await db?.close();
    await proxy?.down();
    await database?.drop();
  });

  const unreachable = expect.objectContaining({ kind: 'unavailable', reason: 'database_unreachable' });
  const inTransaction = (sql: string) => db.transaction((tx) => tx.one(sql));

  /** Resolves once a `pg_sleep` of this database is running on the server. */
  const sleeping = () =>
    withAdminClient(database.url, async (client) => {
      for (;;) {
        const rows = await client.query(
          `SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event = 'PgSleep'`,
        );
        if (rows.rowCount) return;
      }
    });

  const expectServes = async (on: SqlDatabase) => {
    expect(await on.one('SELECT 1 AS ok')).toEqual({ ok: 1 });
    expect(await on.transaction((tx) => tx.one('SELECT 2 AS ok'))).toEqual({ ok: 2 });
  };

  it('a server that never answers: the connect times out (pool timeout) into UnavailableError', async () => {
    proxy.blackhole();
    await expect(db.one('SELECT 1')).rejects.toEqual(unreachable);
    await expect(inTransaction('SELECT 1')).rejects.toBeInstanceOf(UnavailableError);
    await proxy.up();
    await expectServes(db);
  });

  it.each([
    ['a statement', (sql: string) => db.one(sql)],
    ['a transaction', inTransaction],
  ])(
    'a connection reset under %s in flight is UnavailableError, and the process lives on',
    async (_n, run) => {
      const pending = run('SELECT pg_sleep(30)');
      await sleeping();
      proxy.dropConnections();
      await expect(pending).rejects.toEqual(unreachable);
      await expectServes(db);
    },
  );

  it('a backend terminated under a statement (57P01 admin_shutdown) is UnavailableError', async () => {
    const pending = db.one('SELECT pg_sleep(30)');
    await sleeping();
    await withAdminClient(database.url, (client) =>
      client.query(
        `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
         WHERE datname = current_database() AND wait_event = 'PgSleep'`,
      ),
    );
    await expect(pending).rejects.toEqual(unreachable);
    await expectServes(db);
  });

  it('a heartbeat batch that cannot reach the server fails each of its callers with UnavailableError', async () => {
    const sessions = new SqlWorkerSessionRepository(db, createIdGenerator());
    const batcher = new HeartbeatBatcher(sessions, { windowMs: 60_000, maxSize: 3, cancelLimit: 8 });
    proxy.blackhole();
    const calls = ['a', 'b', 'c'].map((w) =>
      batcher.heartbeat({
        workerId: w,
        sessionId: newSessionId(),
        fence: { generation: 1, expectedVersion: 0 },
        leaseMs: 30_000,
        availableSlots: 1,
      }),
    );
    for (const call of calls) await expect(call).rejects.toEqual(unreachable);
  });

  it('an error that is not about the connection is left as it is', async () => {
    await expect(db.one('SELECT no_such_column FROM pg_class')).rejects.toMatchObject({ code: '42703' });
    await expect(inTransaction('SELECT 1/0')).rejects.toMatchObject({ code: '22012' });
  });

  it('a table that does not exist yet is UnavailableError migrations_pending (a replica before `migrate`)', async () => {
    for (const query of [db.one('SELECT * FROM no_such_table'), inTransaction('SELECT * FROM no_such_table')])
      await expect(query).rejects.toMatchObject({ kind: 'unavailable', reason: 'migrations_pending' });
  });
});
