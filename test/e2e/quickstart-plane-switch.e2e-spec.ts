/**
 * Issue 29 item 8: a quickstart switched from SQLite to PostgreSQL in the same folder (the README's
 * "Several replicas on PostgreSQL": `QL_PROFILE=cluster-control QL_DEV_PKI=true npm start`, the same
 * dev PKI) must not hand its worker the SQLite plane's certificate, which the PostgreSQL plane never
 * issued and cannot renew: the worker enrolls with this plane (its state in a folder of its own), and
 * back on SQLite it finds its first state as it was, with no new token.
 */
import { X509Certificate } from 'node:crypto';
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { EntryPoint, QUICKSTART, quickstartEnv, runCli, tempDir } from '../support/entry-points';
import { createPostgresDatabase, TestPostgresDatabase } from '../support/databases';

describe('a quickstart started on another database in the same folder', () => {
  let dir: string;
  let sqliteEnv: Record<string, string>;
  let pg: TestPostgresDatabase;
  const started: EntryPoint[] = [];
  const quickstartLines = (q: EntryPoint, text: string) =>
    q.messages().filter((m) => m.startsWith(`quickstart: ${text}`));

  /** Starts a quickstart, waits for its worker's session, and returns it with the files its worker uses. */
  async function start(env: Record<string, string>) {
    const q = new EntryPoint(QUICKSTART, env);
    started.push(q);
    await q.until('worker-1 registered', async () => q.lines.find((l) => l.msg === 'worker registered'), {
      deadlineMs: 60_000,
    });
    const pid = Number(q.lines.find((l) => l.msg === 'quickstart: worker-1 started')?.pid);
    const environ = Object.fromEntries(
      readFileSync(`/proc/${pid}/environ`, 'utf8')
        .split('\0')
        .filter(Boolean)
        .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
    );
    const cert = environ.QL_WORKER_TLS_CERT!;
    return { q, cert, journal: environ.QL_WORKER_JOURNAL_DIR!, fingerprint: fingerprintOf(cert) };
  }
  const fingerprintOf = (file: string) =>
    new X509Certificate(readFileSync(file)).fingerprint256.replace(/:/g, '').toLowerCase();
  async function stop(q: EntryPoint) {
    q.kill('SIGINT');
    expect(await q.exited).toEqual({ code: 0, signal: null });
  }
  /** worker-1 as the admin API of the plane on `env`'s database shows it. */
  async function workerView(env: Record<string, string>) {
    const key = await runCli(env, 'api-key', '--name', '运维', '--role', 'viewer');
    const token = (JSON.parse(key.stdout) as { token: string }).token;
    const res = await fetch(`http://127.0.0.1:${env.QL_ADMIN_PORT}/api/v1/workers/worker-1`, {
      headers: { authorization: `Bearer ${token}` },
    });
    return (await res.json()) as { status: string; certificateFingerprint: string };
  }

  beforeAll(async () => {
    dir = tempDir('ql-quickstart-switch-');
    sqliteEnv = await quickstartEnv(dir, { QL_WORKER_HEARTBEAT_MS: '200', QL_WORKER_MACHINE_CLASS: 'large' });
    pg = await createPostgresDatabase();
  });
  afterAll(async () => {
    // A failed expectation leaves its quickstart running: stopped here, else jest would wait on it.
    for (const q of started.filter((p) => p.running)) {
      q.kill('SIGTERM');
      await q.exited;
    }
    await pg?.drop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('enrolls with the PostgreSQL plane in a folder of its own, and finds its SQLite state again on the way back', async () => {
    const onSqlite = await start(sqliteEnv);
    expect(onSqlite.cert).toBe(join(dir, 'worker', 'worker-1', 'tls', 'worker.crt'));
    expect(quickstartLines(onSqlite.q, 'worker-1 enrolls with a new token')).toHaveLength(1);
    await stop(onSqlite.q);

    const pgEnv = {
      ...sqliteEnv,
      QL_PROFILE: 'cluster-control',
      QL_DEV_PKI: 'true',
      QL_DATABASE_URL: pg.url,
    };
    const onPostgres = await start(pgEnv);
    // A new key and certificate from this plane, in another folder; the SQLite plane's left alone.
    expect(quickstartLines(onPostgres.q, 'worker-1 enrolls with a new token')).toHaveLength(1);
    expect(onPostgres.cert).toMatch(
      new RegExp(`^${join(dir, 'worker')}/worker-1@[0-9a-f]{12}/tls/worker\\.crt$`),
    );
    expect(onPostgres.journal).not.toBe(onSqlite.journal);
    expect(onPostgres.fingerprint).not.toBe(onSqlite.fingerprint);
    expect(quickstartLines(onPostgres.q, 'worker-1 keeps its state in')).toHaveLength(1);
    // The plane knows the certificate the worker holds: it issued it, so it renews it.
    expect(await workerView(pgEnv)).toMatchObject({
      status: 'online',
      certificateFingerprint: onPostgres.fingerprint,
    });
    await stop(onPostgres.q);

    // Back on SQLite: its own folder, renewed over mTLS at start, no token.
    const back = await start(sqliteEnv);
    expect(back.cert).toBe(onSqlite.cert);
    expect(quickstartLines(back.q, 'worker-1 enrolls with a new token')).toEqual([]);
    expect(quickstartLines(back.q, 'worker-1 keeps its state in')).toEqual([]);
    expect(await workerView(sqliteEnv)).toMatchObject({
      status: 'online',
      certificateFingerprint: back.fingerprint,
    });
    await stop(back.q);
  });
});
