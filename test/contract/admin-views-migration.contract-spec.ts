// Size: the admin-views migration on both dialects, applied over rows written before it: a worker's
// labels become rows and each attempt learns the session of its newest lease.
import { DataSource } from 'typeorm';
import { POSTGRES_MIGRATIONS, SQLITE_MIGRATIONS } from '../../migrations';
import { runMigrations } from '@ql/persistence';
import { createPostgresDatabase, createSqliteFile } from '../support/databases';
import { validCapabilities } from '../support/fixtures';

type Dialect = 'sqlite' | 'postgres';

/** A database at the newest schema, opened through TypeORM so the last migration can be undone and redone. */
async function openMigrated(dialect: Dialect): Promise<{ ds: DataSource; dispose: () => Promise<void> }> {
  const common = { migrationsTableName: 'schema_migrations' };
  if (dialect === 'sqlite') {
    const file = createSqliteFile();
    await runMigrations({ dialect, path: file.path });
    const ds = new DataSource({
      type: 'better-sqlite3',
      database: file.path,
      migrations: SQLITE_MIGRATIONS,
      ...common,
    });
    await ds.initialize();
    return { ds, dispose: async () => (await ds.destroy(), file.remove()) };
  }
  const db = await createPostgresDatabase();
  const ds = new DataSource({ type: 'postgres', url: db.url, migrations: POSTGRES_MIGRATIONS, ...common });
  await ds.initialize();
  return { ds, dispose: async () => (await ds.destroy(), await db.drop()) };
}

describe.each<Dialect>(['sqlite', 'postgres'])('admin-views migration over existing rows (%s)', (dialect) => {
  it('backfills worker_labels from the stored capabilities and attempts.session_id from the newest lease', async () => {
    const { ds, dispose } = await openMigrated(dialect);
    try {
      // Undo down to before admin-views (later migrations first), then redo them all below.
      const list = dialect === 'sqlite' ? SQLITE_MIGRATIONS : POSTGRES_MIGRATIONS;
      const adminViews = list.findIndex((m) => m.name.startsWith('AdminViews'));
      for (let i = list.length - 1; i >= adminViews; i--) await ds.undoLastMigration({ transaction: 'all' });
      const p = (n: number) => (dialect === 'sqlite' ? '?' : `$${n}`);
      const time = dialect === 'sqlite' ? Date.now() : new Date().toISOString();
      const insert = (table: string, row: Record<string, unknown>) =>
        ds.query(
          `INSERT INTO ${table} (${Object.keys(row).join(', ')}) VALUES (${Object.keys(row)
            .map((_k, i) => p(i + 1))
            .join(', ')})`,
          Object.values(row),
        );
      const capabilities = validCapabilities({ labels: { zone: 'lab', tier: '' } });
      await insert('workers', {
        worker_id: 'worker-old',
        session_id: '01900000-0000-7000-8000-000000000001',
        generation: 2,
        version: 5,
        status: 'offline',
        lease_expires_at: time,
        max_concurrent_runs: 4,
        available_slots: 0,
        registration_digest: 'r',
        capabilities_json: JSON.stringify(capabilities),
        capabilities_digest: 'd',
        software_version: '0.1.0',
        protocol_version: 3,
        registered_at: time,
        last_seen_at: time,
        created_at: time,
      });
      const attemptId = '01900000-0000-7000-8000-0000000000a1';
      const runId = '01900000-0000-7000-8000-0000000000b1';
      await insert('attempts', {
        id: attemptId,
        run_id: runId,
        attempt_no: 1,
        status: 'lost',
        version: 3,
        worker_id: 'worker-old',
        lease_generation: 2,
        created_at: time,
        updated_at: time,
      });
      for (const [generation, session] of [
        [1, '01900000-0000-7000-8000-000000000001'],
        [2, '01900000-0000-7000-8000-000000000002'],
      ] as const)
        await insert('run_leases', {
          attempt_id: attemptId,
          lease_generation: generation,
          offer_id: `01900000-0000-7000-8000-00000000000${generation + 4}`,
          run_id: runId,
          worker_id: 'worker-old',
          session_id: session,
          session_generation: generation,
          version: 0,
          token_digest: 't',
          state: 'expired',
          expires_at: time,
          claimed_at: time,
        });

      await ds.runMigrations({ transaction: 'all' });

      const labels = (await ds.query(
        'SELECT worker_id, key, value FROM worker_labels ORDER BY key',
      )) as Record<string, string>[];
      expect(labels).toEqual([
        { worker_id: 'worker-old', key: 'tier', value: '' },
        { worker_id: 'worker-old', key: 'zone', value: 'lab' },
      ]);
      const attempts = (await ds.query('SELECT session_id FROM attempts')) as { session_id: string }[];
      expect(attempts).toEqual([{ session_id: '01900000-0000-7000-8000-000000000002' }]);
    } finally {
      await dispose();
    }
  });
});
