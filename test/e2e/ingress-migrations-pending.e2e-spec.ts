/**
 * Issue 29.8: a cluster-control replica on a PostgreSQL database that `migrate` has not run on yet
 * answers every worker call 503 `worker_ingress_unavailable` with reason `migrations_pending` and a
 * `Retry-After`, logs it as one warning (not an error per call), and serves the same worker once the
 * migrations are applied. PostgreSQL only: the standalone (SQLite) profile migrates by itself.
 */
import { ingressPath } from '@ql/contracts';
import { runMigrations } from '@ql/persistence';
import { LevelledLog } from '../support/captured-log';
import { createPostgresDatabase, TestPostgresDatabase } from '../support/databases';
import { newSessionId, registerBody } from '../support/fixtures';
import { TestPlane, createTestPki, readPair, startTestPlane } from '../support/test-plane';

describe('worker calls before `migrate` (postgres)', () => {
  let db: TestPostgresDatabase;
  let pki: Awaited<ReturnType<typeof createTestPki>>;
  let t: TestPlane;
  const log = new LevelledLog();

  beforeAll(async () => {
    db = await createPostgresDatabase({ migrated: false });
    pki = await createTestPki(['router-sh-01']);
    t = await startTestPlane(
      { dialect: 'postgres', url: db.url, dispose: async () => {} },
      pki,
      {},
      {
        seedKeys: false,
        logger: log,
      },
    );
  });
  afterAll(async () => {
    await t?.close();
    await db?.drop();
    pki?.remove();
  });

  it('answers 503 migrations_pending with Retry-After, warns once, and registers once migrated', async () => {
    const credentials = readPair(pki.workers['router-sh-01']!);
    const register = () =>
      t.ingress(credentials, ingressPath('router-sh-01', newSessionId(), 'register'), registerBody());
    for (let i = 0; i < 5; i++) {
      const res = await register();
      expect({ status: res.status, body: res.body, retryAfter: res.headers['retry-after'] }).toEqual({
        status: 503,
        body: expect.objectContaining({ code: 'worker_ingress_unavailable', reason: 'migrations_pending' }),
        retryAfter: expect.stringMatching(/^\d+$/),
      });
    }
    // A v1 register (protocol 3) is answered as v1 was: the same 503, without the newer reason.
    const v1 = await t.ingress(
      credentials,
      ingressPath('router-sh-01', newSessionId(), 'register'),
      registerBody({ protocolVersion: 3 }),
    );
    expect({ status: v1.status, body: v1.body }).toEqual({
      status: 503,
      body: { code: 'worker_ingress_unavailable', message: expect.any(String) },
    });
    expect(log.at('error')).toEqual([]);
    expect(log.at('warn')).toEqual([expect.stringContaining('migrations pending')]);

    await runMigrations({ dialect: 'postgres', url: db.url });
    expect((await register()).status).toBe(200);
  });
});
