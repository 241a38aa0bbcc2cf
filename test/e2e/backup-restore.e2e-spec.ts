/**
 * Issue 29.7: backup and restore as docs/operations.md describes them. `backup --out` copies the
 * SQLite database of a running control plane while it writes (SQLite's online backup): the copy is
 * whole (integrity-checked), holds every task made before it started, and a control plane restored
 * from it (the old file and its -wal/-shm moved aside, the copy in its place) serves them. A backup
 * never overwrites a file, and a PostgreSQL URL is sent to pg_dump; both exit 2 and write nothing.
 */
import { copyFileSync, existsSync, readdirSync, renameSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { runCli, tempDir } from '../support/entry-points';
import {
  TestDatabase,
  TestPlane,
  createTestDatabase,
  createTestPki,
  startTestPlane,
} from '../support/test-plane';

type TestPki = Awaited<ReturnType<typeof createTestPki>>;

/** QingLong's names: a script per task, its Chinese title in the output. */
const TASKS = Array.from({ length: 60 }, (_, i) => ({
  name: `jd-task-${String(i).padStart(3, '0')}`,
  command: `echo "京东任务 ${i}：签到领京豆"`,
  runtime: 'shell',
}));

describe('backup and restore (SQLite)', () => {
  let db: TestDatabase;
  let pki: TestPki;
  let t: TestPlane;
  let dir: string;
  const dbPath = () => db.url.slice('sqlite:'.length);
  const taskNames = async (plane: TestPlane) => {
    const names: string[] = [];
    for (let after = ''; ;) {
      const page = await plane.admin('GET', `/api/v1/tasks?limit=200${after ? `&after=${after}` : ''}`);
      expect(page.status).toBe(200);
      const body = page.body as { items: { id: string; name: string }[]; nextAfter: string | null };
      names.push(...body.items.map((task) => task.name));
      if (!body.nextAfter) return names.sort();
      after = body.nextAfter;
    }
  };

  beforeAll(async () => {
    db = await createTestDatabase('sqlite');
    pki = await createTestPki(['worker-a']);
    t = await startTestPlane(db, pki);
    dir = tempDir('ql-backup-');
  });
  afterAll(async () => {
    await t?.close();
    await db?.dispose();
    pki?.remove();
  });

  it('copies the database of a running plane while it writes; a plane restored from the copy serves what it held', async () => {
    for (const task of TASKS) expect((await t.admin('POST', '/api/v1/tasks', task)).status).toBe(201);
    // The plane keeps writing while the backup runs: the copy is one consistent moment of it.
    let writing = true;
    let more = 0;
    const writer = (async () => {
      while (writing) {
        const res = await t.admin('POST', '/api/v1/tasks', { ...TASKS[0]!, name: `later-${more}` });
        expect(res.status).toBe(201);
        more++;
      }
    })();
    const out = join(dir, 'ql-backup.sqlite');
    const backup = await runCli({ QL_DATABASE_URL: db.url }, 'backup', '--out', out);
    writing = false;
    await writer;
    expect(backup.code).toBe(0);
    expect(JSON.parse(backup.stdout)).toMatchObject({
      file: out,
      bytes: expect.any(Number),
      pages: expect.any(Number),
    });
    expect(readdirSync(dir)).toEqual(['ql-backup.sqlite']); // no partial file left behind

    // Restore as docs/operations.md says: stop the plane, move the database and its -wal/-shm aside,
    // put the copy in its place, start.
    await t.close();
    const aside = join(dirname(dbPath()), 'before-restore');
    for (const suffix of ['', '-wal', '-shm'])
      if (existsSync(dbPath() + suffix)) renameSync(dbPath() + suffix, aside + suffix);
    copyFileSync(out, dbPath());
    t = await startTestPlane(db, pki);
    const restored = await taskNames(t);
    // Every task made before the backup began; of those made during it, a prefix (one moment), none torn.
    const later = restored.filter((name) => name.startsWith('later-'));
    expect(restored.filter((name) => !name.startsWith('later-'))).toEqual(TASKS.map((task) => task.name));
    expect(later.length).toBeLessThanOrEqual(more);
    expect(later.sort()).toEqual(Array.from({ length: later.length }, (_, i) => `later-${i}`).sort());
  });

  it('never overwrites a file and sends PostgreSQL to pg_dump: exit 2, nothing written', async () => {
    const existing = join(dir, 'taken.sqlite');
    writeFileSync(existing, 'an operator file\n');
    const [taken, postgres, noOut] = await Promise.all([
      runCli({ QL_DATABASE_URL: db.url }, 'backup', '--out', existing),
      runCli(
        { QL_DATABASE_URL: 'postgres://ql@127.0.0.1:5432/ql' },
        'backup',
        '--out',
        join(dir, 'pg.sqlite'),
      ),
      runCli({ QL_DATABASE_URL: db.url }, 'backup'),
    ]);
    expect(taken).toMatchObject({ code: 2, stdout: '' });
    expect(taken.stderr).toContain(`backup: ${existing} exists`);
    expect(postgres).toMatchObject({ code: 2, stdout: '' });
    expect(postgres.stderr).toContain('for PostgreSQL use pg_dump');
    expect(noOut).toMatchObject({ code: 2, stdout: '' });
    expect(noOut.stderr).toContain('--out <file> is required');
    expect(readdirSync(dir).sort()).toEqual(['ql-backup.sqlite', 'taken.sqlite']);
  });
});
