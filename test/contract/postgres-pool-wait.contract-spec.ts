import { setTimeout as delay } from 'node:timers/promises';
import { PostgresDatabase } from '@ql/persistence';
import { TestPostgresDatabase, createPostgresDatabase } from '../support/databases';

/**
 * ADR 0039: the wait for a pooled connection is bounded apart from the connect timeout. A burst that
 * keeps every connection busy longer than the connect timeout waits (up to the pool wait) and is
 * served; past the pool wait it is refused as `database_busy` — the database answered, it was busy —
 * never as `database_unreachable`. pg-pool alone bounds both with `connectionTimeoutMillis`.
 */
describe('PostgreSQL adapter: the wait for a pooled connection', () => {
  let database: TestPostgresDatabase;
  const opened: PostgresDatabase[] = [];
  const open = async (connectTimeoutMs: number, poolWaitMs: number) => {
    const db = await PostgresDatabase.open(
      { url: database.url, poolSize: 1, connectTimeoutMs, poolWaitMs },
      false,
    );
    opened.push(db);
    return db;
  };

  beforeAll(async () => {
    database = await createPostgresDatabase();
  });
  afterAll(async () => {
    for (const db of opened) await db.close();
    await database?.drop();
  });

  /** Holds the pool's one connection in a transaction until `release()`; resolves once it holds it. */
  async function holdTheConnection(db: PostgresDatabase) {
    let release!: () => void;
    const released = new Promise<void>((done) => (release = done));
    let holding!: () => void;
    const held = new Promise<void>((done) => (holding = done));
    const tx = db.transaction(async (t) => {
      await t.one('SELECT 1 AS ok');
      holding();
      await released;
    });
    await held;
    return { release: async () => (release(), await tx) };
  }

  it('waits past the connect timeout while every connection is busy, then is served', async () => {
    const connectTimeoutMs = 200;
    const db = await open(connectTimeoutMs, 120_000);
    const holder = await holdTheConnection(db);
    let settled: string | undefined;
    const waiting = db.one<{ ok: number }>('SELECT 2 AS ok').then(
      (row) => ((settled = 'served'), row),
      (error: unknown) => ((settled = `refused: ${(error as Error).message}`), undefined),
    );
    // The bound is the point: three connect timeouts pass with the request still waiting, not refused.
    await delay(3 * connectTimeoutMs);
    expect(settled).toBeUndefined();
    await holder.release();
    expect(await waiting).toEqual({ ok: 2 });
    expect(settled).toBe('served');
  });

  it('past the pool wait a request is refused as database_busy, naming the wait; the pool serves again after', async () => {
    const db = await open(60_000, 300);
    const holder = await holdTheConnection(db);
    await expect(db.one('SELECT 1')).rejects.toEqual(
      expect.objectContaining({
        kind: 'unavailable',
        reason: 'database_busy',
        message: 'no database connection was free within 300 ms (all 1 in use); retry later',
      }),
    );
    await expect(db.transaction((tx) => tx.one('SELECT 1'))).rejects.toEqual(
      expect.objectContaining({ reason: 'database_busy' }),
    );
    await holder.release();
    expect(await db.one('SELECT 3 AS ok')).toEqual({ ok: 3 });
    expect(await db.transaction((tx) => tx.one('SELECT 4 AS ok'))).toEqual({ ok: 4 });
  });
});
