/**
 * R-OPS-1, R-OPS-3: a cluster-control replica started on an empty PostgreSQL database (created, not
 * migrated) says once that migrations are pending and which command applies them; its sweeper and
 * cron wait quietly instead of failing every cycle; after `migrate` it turns ready and the loops run.
 * PostgreSQL only: the standalone (SQLite) profile migrates by itself.
 */
import { rmSync } from 'node:fs';
import { get } from 'node:http';
import { join } from 'node:path';
import { createIdGenerator, systemClock } from '@ql/contracts';
import { createRepositories, openDatabase, parseDatabaseUrl } from '@ql/persistence';
import { apiKeyDigest, newApiKeyToken } from '../../apps/control-plane/src/identity/api-keys';
import { TestPostgresDatabase, createPostgresDatabase } from '../support/databases';
import { CLI, CONTROL_PLANE, EntryPoint, tempDir } from '../support/entry-points';

function fetchText(url: string, token?: string): Promise<{ status: number; text: string }> {
  return new Promise((done, fail) => {
    get(url, { headers: token ? { authorization: `Bearer ${token}` } : {} }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () => done({ status: res.statusCode ?? 0, text }));
    }).on('error', fail);
  });
}

/** A viewer key written straight into the database (the admin API needs one to show /metrics). */
async function viewerKey(url: string): Promise<string> {
  const db = await openDatabase(parseDatabaseUrl(url), systemClock, false);
  try {
    const ids = createIdGenerator();
    const token = newApiKeyToken();
    await createRepositories(db, ids).apiKeys.create(
      { id: ids.uuidV7(), name: 'test-viewer', role: 'viewer', digest: apiKeyDigest(token) },
      { actor: 'test', action: 'api_key.create', target: 'test' },
    );
    return token;
  } finally {
    await db.close();
  }
}

describe('cluster-control on an un-migrated PostgreSQL database', () => {
  let db: TestPostgresDatabase;
  let dir: string;
  let plane: EntryPoint | undefined;

  beforeAll(async () => {
    db = await createPostgresDatabase({ migrated: false });
    dir = tempDir('ql-unmigrated-');
  });
  afterAll(async () => {
    if (plane?.running) {
      plane.kill('SIGTERM');
      await plane.exited;
    }
    await db?.drop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('warns once that migrations are pending, the loops wait without errors; after `migrate` /readyz is 200 and the sweeper runs', async () => {
    const env = { QL_PROFILE: 'cluster-control', QL_DATABASE_URL: db.url };
    plane = new EntryPoint(CONTROL_PLANE, {
      ...env,
      QL_ADMIN_PORT: '0',
      QL_INGRESS_PORT: '0',
      QL_DEV_PKI: 'true',
      QL_DEV_PKI_DIR: join(dir, 'pki'),
      // Every 20 ms: a loop failing each cycle would log dozens of lines while `migrate` runs.
      QL_SWEEP_INTERVAL_MS: '20',
      QL_CRON_TICK_MS: '20',
    });
    const p = plane;
    const ready = await p.until('control plane ready', async () => p.lines.find((l) => l.msg === 'control plane ready'));
    const admin = String(ready.admin);
    expect((await fetchText(`${admin}/readyz`)).status).toBe(503);

    const migrate = new EntryPoint(CLI, env, ['migrate']);
    expect(await migrate.exited).toEqual({ code: 0, signal: null });
    expect(migrate.messages()).toEqual(['(not JSON) migrations applied (postgres)']);
    await p.until('/readyz 200', async () => ((await fetchText(`${admin}/readyz`)).status === 200 ? true : undefined), {
      pollMs: 100,
    });

    const token = await viewerKey(db.url);
    await p.until(
      'a sweeper cycle in /metrics',
      async () => {
        const metrics = await fetchText(`${admin}/metrics`, token);
        const cycles = Number(/^ql_sweeper_cycle_duration_seconds_count (\d+)$/m.exec(metrics.text)?.[1] ?? 0);
        return cycles > 0 ? cycles : undefined;
      },
      { pollMs: 50 },
    );
    const loud = p.lines.filter((l) => l.level === 'warn' || l.level === 'error');
    expect(loud.map((l) => l.msg)).toEqual([
      'migrations pending: run `npm run migrate` with this QL_DATABASE_URL; until then /readyz is 503 and the sweeper and cron wait',
    ]);
    expect(p.stderr).toEqual([]);
  });
});
