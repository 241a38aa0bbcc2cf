/**
 * R-OPS-1, R-OPS-3: a cluster-control replica started on an empty PostgreSQL database (created, not
 * migrated) says once that migrations are pending and which command applies them; its sweeper and
 * cron wait quietly instead of failing every cycle; after `migrate` it turns ready and the loops run.
 * PostgreSQL only: the standalone (SQLite) profile migrates by itself.
 *
 * Issue 16: the log says "ready" only when /readyz would answer 200 — "listening; not ready:
 * migrations pending" first, "control plane ready" once `migrate` has run (the control plane itself,
 * and the quickstart that starts it). Each start is awaited as its log line: a start that takes 22 s
 * on a loaded machine is slow, not broken, so the deadline is START_DEADLINE_MS (the process exiting
 * first still fails at once) and the test's own timeout is above the sum of its waits.
 */
import { rmSync } from 'node:fs';
import { get } from 'node:http';
import { join } from 'node:path';
import { createIdGenerator, systemClock } from '@ql/contracts';
import { createRepositories, openDatabase, parseDatabaseUrl } from '@ql/persistence';
import { apiKeyDigest, newApiKeyToken } from '../../apps/control-plane/src/identity/api-keys';
import { TestPostgresDatabase, createPostgresDatabase } from '../support/databases';
import { CLI, CONTROL_PLANE, EntryPoint, QUICKSTART, tempDir } from '../support/entry-points';

const START_DEADLINE_MS = 120_000;
const TEST_TIMEOUT_MS = 4 * START_DEADLINE_MS;
const LISTENING = 'control plane listening; not ready: migrations pending';

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

async function migrate(env: Record<string, string>): Promise<void> {
  const migrate = new EntryPoint(CLI, env, ['migrate']);
  expect(await migrate.exited).toEqual({ code: 0, signal: null });
  expect(migrate.messages()).toEqual(['(not JSON) migrations applied (postgres)']);
}

describe('cluster-control on an un-migrated PostgreSQL database', () => {
  const dbs: TestPostgresDatabase[] = [];
  let dir: string;
  const started: EntryPoint[] = [];
  /** A fresh un-migrated database, and the settings of a cluster-control replica on it (free ports, dev PKI). */
  const unmigrated = async (pki: string) => {
    const db = await createPostgresDatabase({ migrated: false });
    dbs.push(db);
    const env = { QL_PROFILE: 'cluster-control', QL_DATABASE_URL: db.url };
    const start = {
      ...env,
      QL_ADMIN_PORT: '0',
      QL_INGRESS_PORT: '0',
      QL_DEV_PKI: 'true',
      QL_DEV_PKI_DIR: join(dir, pki),
    };
    return { db, env, start };
  };

  beforeAll(() => {
    dir = tempDir('ql-unmigrated-');
  });
  afterAll(async () => {
    for (const p of started) {
      if (p.running) {
        p.kill('SIGTERM');
        await p.exited;
      }
    }
    for (const db of dbs) await db.drop();
    rmSync(dir, { recursive: true, force: true });
  });

  it(
    'warns once that migrations are pending, the loops wait without errors; after `migrate` /readyz is 200 and the sweeper runs',
    async () => {
      const { db, env, start } = await unmigrated('pki');
      const plane = new EntryPoint(CONTROL_PLANE, {
        ...start,
        // Every 20 ms: a loop failing each cycle would log dozens of lines while `migrate` runs.
        QL_SWEEP_INTERVAL_MS: '20',
        QL_CRON_TICK_MS: '20',
      });
      started.push(plane);
      const p = plane;
      const listening = await p.until(LISTENING, async () => p.lines.find((l) => l.msg === LISTENING), {
        deadlineMs: START_DEADLINE_MS,
      });
      const admin = String(listening.admin);
      expect((await fetchText(`${admin}/readyz`)).status).toBe(503);
      expect(p.messages()).not.toContain('control plane ready');

      await migrate(env);
      await p.until('control plane ready', async () => p.lines.find((l) => l.msg === 'control plane ready'), {
        deadlineMs: START_DEADLINE_MS,
      });
      expect((await fetchText(`${admin}/readyz`)).status).toBe(200);

      const token = await viewerKey(db.url);
      await p.until(
        'a sweeper cycle in /metrics',
        async () => {
          const metrics = await fetchText(`${admin}/metrics`, token);
          const cycles = Number(
            /^ql_sweeper_cycle_duration_seconds_count (\d+)$/m.exec(metrics.text)?.[1] ?? 0,
          );
          return cycles > 0 ? cycles : undefined;
        },
        { pollMs: 50 },
      );
      const loud = p.lines.filter((l) => l.level === 'warn' || l.level === 'error');
      expect(loud.map((l) => l.msg)).toEqual([
        'migrations pending: run `npm run migrate` with this QL_DATABASE_URL; until then /readyz is 503 and the sweeper and cron wait',
      ]);
      expect(p.stderr).toEqual([]);
    },
    TEST_TIMEOUT_MS,
  );

  it(
    'the quickstart says "listening; not ready" too, and "ready" once `migrate` has run',
    async () => {
      const { env, start } = await unmigrated('pki-quickstart');
      const quickstart = new EntryPoint(QUICKSTART, start);
      started.push(quickstart);
      const q = quickstart;
      const said = (msg: string) => async () => q.lines.find((l) => l.msg === msg);
      await q.until('quickstart: not ready', said(`quickstart: ${LISTENING} (run \`npm run migrate\`)`), {
        deadlineMs: START_DEADLINE_MS,
      });
      const admin = String(q.lines.find((l) => l.msg === LISTENING)!.admin);
      expect((await fetchText(`${admin}/readyz`)).status).toBe(503);
      expect(q.messages()).not.toContain('quickstart: control plane ready');

      await migrate(env);
      await q.until('quickstart: ready', said('quickstart: control plane ready'), {
        deadlineMs: START_DEADLINE_MS,
      });
      expect((await fetchText(`${admin}/readyz`)).status).toBe(200);
    },
    TEST_TIMEOUT_MS,
  );
});
