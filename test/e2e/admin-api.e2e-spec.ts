import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { INGRESS_ACTIONS, ingressPath } from '@ql/contracts';
import { PostgresDatabase } from '@ql/persistence';
import type { QueryRunner } from 'typeorm';
import { POSTGRES_MIGRATIONS, SQLITE_MIGRATIONS } from '../../migrations';
import { SWAGGER_UI_PATH } from '../../apps/control-plane/src/api-docs';
import { registeredRoutes, routeKey } from '../support/admin-routes';
import { snapshotDatabase } from '../support/db-snapshot';
import { createPostgresDatabase } from '../support/databases';
import { newSessionId, registerBody } from '../support/fixtures';
import {
  Dialect,
  TestDatabase,
  TestPlane,
  createTestDatabase,
  createTestPki,
  readPair,
  startTestPlane,
} from '../support/test-plane';

describe.each<Dialect>(['sqlite', 'postgres'])('admin API and probes (%s)', (dialect) => {
  let db: TestDatabase;
  let pki: Awaited<ReturnType<typeof createTestPki>>;
  let t: TestPlane;

  beforeAll(async () => {
    db = await createTestDatabase(dialect);
    pki = await createTestPki(['worker-a', 'worker-b']);
    t = await startTestPlane(db, pki, { QL_REVOCATION_CACHE_MS: '0' });
    for (const id of ['worker-a', 'worker-b']) {
      const res = await t.ingress(
        readPair(pki.workers[id]!),
        ingressPath(id, newSessionId(), 'register'),
        registerBody(),
      );
      expect(res.status).toBe(200);
    }
  });
  afterAll(async () => {
    await t?.close();
    await db?.dispose();
    pki?.remove();
  });

  it('probes answer without credentials', async () => {
    const live = await t.admin('GET', '/livez', undefined, null);
    const ready = await t.admin('GET', '/readyz', undefined, null);
    expect(live.status).toBe(200);
    expect(ready.status).toBe(200);
    expect(ready.body).toMatchObject({ status: 'ok', details: { database: { status: 'up', dialect } } });
  });

  it('refuses the API without a key (401), with a bad key (401) and viewers on admin routes (403)', async () => {
    expect((await t.admin('GET', '/api/v1/workers', undefined, null)).status).toBe(401);
    const bad = await t.admin('GET', '/api/v1/workers', undefined, 'qlk_' + 'A'.repeat(43));
    expect(bad.status).toBe(401);
    expect(bad.headers['content-type']).toContain('application/problem+json');
    expect(bad.body).toMatchObject({ code: 'authentication_required', status: 401 });
    expect((await t.admin('GET', '/api/v1/workers', undefined, t.viewerToken)).status).toBe(200);
    const forbidden = await t.admin('POST', '/api/v1/workers/worker-a/disable', undefined, t.viewerToken);
    expect(forbidden.status).toBe(403);
    expect(forbidden.body).toMatchObject({ code: 'forbidden' });
    expect((await t.admin('GET', '/api/v1/workers/worker-a')).body).toMatchObject({ disabled: false });
  });

  it('lists workers with keyset pages and shows status, generation, version, lease and capabilities', async () => {
    const first = await t.admin('GET', '/api/v1/workers?limit=1', undefined, t.viewerToken);
    expect(first.body).toMatchObject({ items: [{ workerId: 'worker-a' }], nextAfter: 'worker-a' });
    const second = await t.admin('GET', '/api/v1/workers?limit=1&after=worker-a', undefined, t.viewerToken);
    expect(second.body).toMatchObject({ items: [{ workerId: 'worker-b' }] });
    const detail = await t.admin('GET', '/api/v1/workers/worker-b', undefined, t.viewerToken);
    expect(detail.body).toMatchObject({
      workerId: 'worker-b',
      status: 'online',
      generation: 1,
      version: 0,
      leaseExpiresAt: expect.stringMatching(/Z$/),
      capabilities: { architecture: 'x64', executors: ['local-process'] },
    });
    expect((await t.admin('GET', '/api/v1/workers/nobody')).status).toBe(404);
    expect((await t.admin('GET', '/api/v1/workers?limit=0')).status).toBe(400);
    expect((await t.admin('GET', '/api/v1/workers?color=red')).body).toMatchObject({
      code: 'invalid_request',
    });
  });

  it('creates, uses and revokes API keys; only digests are stored; every mutation is audited', async () => {
    const created = await t.admin('POST', '/api/v1/api-keys', { name: 'ops', role: 'viewer' });
    expect(created.status).toBe(201);
    const { token, id } = created.body as { token: string; id: string };
    expect(token).toMatch(/^qlk_/);
    const stored = await snapshotDatabase(t.plane.core.db);
    expect(JSON.stringify(stored)).not.toContain(token);
    expect((await t.admin('GET', '/api/v1/workers', undefined, token)).status).toBe(200);
    const list = await t.admin('GET', '/api/v1/api-keys');
    expect(JSON.stringify(list.body)).not.toContain(token);
    expect((await t.admin('POST', `/api/v1/api-keys/${id}/revoke`)).status).toBe(200);
    expect((await t.admin('GET', '/api/v1/workers', undefined, token)).status).toBe(401);
    const audit = await t.admin('GET', '/api/v1/audit');
    const actions = (audit.body as { items: { action: string; target: string }[] }).items.map(
      (e) => `${e.action} ${e.target}`,
    );
    expect(actions).toEqual(
      expect.arrayContaining([`api_key.create api_key:${id}`, `api_key.revoke api_key:${id}`]),
    );
  });

  it('the "nothing written" snapshot covers every table the migrations create', async () => {
    const created: string[] = [];
    const recorder = {
      query: async (sql: string) => {
        created.push(...Array.from(sql.matchAll(/CREATE TABLE (\w+)/g), (m) => m[1]!));
        // A migration that backfills reads rows first: the recording has none.
        return [];
      },
    } as unknown as QueryRunner;
    for (const Migration of dialect === 'sqlite' ? SQLITE_MIGRATIONS : POSTGRES_MIGRATIONS)
      await new Migration().up(recorder);
    expect(created.length).toBeGreaterThan(10);
    const before = await snapshotDatabase(t.plane.core.db);
    expect(Object.keys(before).sort()).toEqual([...created, 'schema_migrations'].sort());
    // A write to a table outside the first five is seen too.
    const task = { name: 'snapshot-probe', command: 'true', runtime: 'shell' };
    expect((await t.admin('POST', '/api/v1/tasks', task)).status).toBe(201);
    const after = await snapshotDatabase(t.plane.core.db);
    const changed = Object.keys(after).filter((table) => !isDeepStrictEqual(after[table], before[table]));
    expect(changed.sort()).toEqual(['audit_log', 'task_revisions', 'tasks']);
  });

  it('rejects a key request with an unknown field and writes nothing', async () => {
    const before = await snapshotDatabase(t.plane.core.db);
    const res = await t.admin('POST', '/api/v1/api-keys', { name: 'x', role: 'admin', scopes: ['*'] });
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ code: 'invalid_request' });
    const badRole = await t.admin('POST', '/api/v1/api-keys', { name: 'x', role: 'root' });
    expect(badRole.status).toBe(400);
    expect(await snapshotDatabase(t.plane.core.db)).toEqual(before);
  });

  it('disabling a worker fences its session, is audited, and enabling lets a new session in', async () => {
    const creds = readPair(pki.workers['worker-b']!);
    const s = newSessionId();
    const reg = await t.ingress(creds, ingressPath('worker-b', s, 'register'), registerBody());
    const version = (reg.body as { version: number }).version;
    const disabled = await t.admin('POST', '/api/v1/workers/worker-b/disable');
    expect(disabled.body).toMatchObject({ disabled: true, status: 'disabled' });
    const hb = await t.ingress(creds, ingressPath('worker-b', s, 'heartbeat'), {
      generation: 2,
      expectedVersion: version,
      availableSlots: 1,
    });
    expect(hb.status).toBe(409);
    const audit = await t.admin('GET', '/api/v1/audit?limit=5');
    expect((audit.body as { items: { action: string; actor: string }[] }).items[0]).toMatchObject({
      action: 'worker.disable',
    });
    expect((await t.admin('POST', '/api/v1/workers/worker-b/enable')).status).toBe(200);
    expect(
      (await t.ingress(creds, ingressPath('worker-b', newSessionId(), 'register'), registerBody())).body,
    ).toMatchObject({ generation: 3 });
  });

  it('revoking a certificate fingerprint refuses that certificate at the edge (401); bad input changes nothing', async () => {
    const creds = readPair(pki.workers['worker-a']!);
    const s = newSessionId();
    expect((await t.ingress(creds, ingressPath('worker-a', s, 'register'), registerBody())).status).toBe(200);
    const before = await snapshotDatabase(t.plane.core.db);
    for (const body of [{ fingerprint: 'abc' }, { fingerprint: 'f'.repeat(64), worker: 'worker-a' }]) {
      const bad = await t.admin('POST', '/api/v1/certificates/revoke', body);
      expect(bad.status).toBe(400);
      expect(bad.body).toMatchObject({ code: 'invalid_request' });
    }
    expect(await snapshotDatabase(t.plane.core.db)).toEqual(before);
    const fingerprint = new X509Certificate(creds.certPem).fingerprint256; // upper case with colons
    const revoked = await t.admin('POST', '/api/v1/certificates/revoke', {
      fingerprint,
      reason: 'laptop stolen',
    });
    expect(revoked.status).toBe(200);
    expect(revoked.body).toMatchObject({ fingerprint: fingerprint.replace(/:/g, '').toLowerCase() });
    const refused = await t.ingress(creds, ingressPath('worker-a', s, 'heartbeat'), {
      generation: 2,
      expectedVersion: 0,
      availableSlots: 1,
    });
    expect(refused.status).toBe(401);
    expect(refused.body).toMatchObject({
      code: 'certificate_revoked',
      message: expect.stringMatching(/revoked/),
    });
    const listed = await t.admin('GET', '/api/v1/certificates/revoked');
    expect((listed.body as { items: { reason: string }[] }).items).toEqual([
      expect.objectContaining({ reason: 'laptop stolen' }),
    ]);
    // worker-b's certificate is untouched
    const other = await t.ingress(
      readPair(pki.workers['worker-b']!),
      ingressPath('worker-b', newSessionId(), 'register'),
      registerBody(),
    );
    expect(other.status).toBe(200);
  });

  it('serves one OpenAPI document, identical to docs/openapi.json, covering every route of both listeners', async () => {
    const res = await t.admin('GET', '/openapi.json', undefined, null);
    expect(res.status).toBe(200);
    const committed = JSON.parse(readFileSync(join(__dirname, '../../docs/openapi.json'), 'utf8'));
    expect(res.body).toEqual(committed);
    // An ingress path names the ingress listener as its server; the others are the admin listener's.
    type PathItem = Record<string, unknown> & { servers?: { description: string }[] };
    const documented = Object.entries((res.body as { paths: Record<string, PathItem> }).paths).flatMap(
      ([path, { servers, ...ops }]) =>
        Object.keys(ops).map((method) => ({
          listener: servers?.[0]?.description.startsWith('worker ingress') ? 'ingress' : 'admin',
          method: method.toUpperCase(),
          url: path.replace(/\{(\w+)\}/g, ':$1'),
        })),
    );
    expect(documented.length).toBeGreaterThan(10);
    for (const { listener, ...route } of documented) {
      const fastify = (listener === 'ingress' ? t.plane.ingress : t.plane.admin)
        .getHttpAdapter()
        .getInstance();
      expect({ listener, ...route, exists: fastify.hasRoute(route as never) }).toMatchObject({
        exists: true,
      });
    }
    // And the other way: every route either listener serves is in the document (R-ADM-2), Swagger
    // UI's scripts and styles aside (its page is documented).
    const registered = [
      ...registeredRoutes(t.plane.admin)
        .filter((r) => !r.url.startsWith(`/${SWAGGER_UI_PATH}/`))
        .map((r) => ({ listener: 'admin', ...r })),
      ...registeredRoutes(t.plane.ingress).map((r) => ({ listener: 'ingress', ...r })),
    ];
    expect(registered).toEqual(
      expect.arrayContaining([
        { listener: 'admin', method: 'GET', url: '/api/v1/workers/:workerId' },
        { listener: 'admin', method: 'POST', url: '/api/v1/tasks/:taskId/runs' },
        { listener: 'admin', method: 'POST', url: '/api/v1/certificates/revoke' },
        { listener: 'admin', method: 'GET', url: '/api/v1/certificates/revoked' },
        {
          listener: 'ingress',
          method: 'POST',
          url: '/api/v3/worker-ingress/workers/:workerId/sessions/:sessionId/register',
        },
        {
          listener: 'ingress',
          method: 'POST',
          url: '/api/v3/worker-ingress/workers/:workerId/sessions/:sessionId/offers',
        },
      ]),
    );
    const key = (r: { listener: string; method: string; url: string }) => `${r.listener} ${routeKey(r)}`;
    const documentedKeys = new Set(documented.map(key));
    expect(registered.map(key).filter((route) => !documentedKeys.has(route))).toEqual([]);
    expect(registered.filter((r) => r.url.startsWith('/api/v1/')).length).toBeGreaterThan(15);
    // Every ingress action is a route (the activation actions included), and enrollment and
    // rotation (ADR 0045 §2, §3).
    expect(registered.filter((r) => r.listener === 'ingress').length).toBe(INGRESS_ACTIONS.length + 2);
  });

  it('serves Swagger UI on the admin listener without credentials, over the same document', async () => {
    const page = await t.admin('GET', `/${SWAGGER_UI_PATH}`, undefined, null);
    expect(page.status).toBe(200);
    expect(page.headers['content-type']).toContain('text/html');
    const init = await t.admin('GET', `/${SWAGGER_UI_PATH}/swagger-ui-init.js`, undefined, null);
    expect(init.status).toBe(200);
    const served = await t.admin('GET', '/openapi.json', undefined, null);
    expect(init.raw).toContain(JSON.stringify((served.body as { info: { title: string } }).info.title));
    const asset = await t.admin('GET', `/${SWAGGER_UI_PATH}/swagger-ui-bundle.js`, undefined, null);
    expect(asset.status).toBe(200);
    const missing = await t.admin('GET', `/${SWAGGER_UI_PATH}/no-such-file.js`, undefined, null);
    expect(missing.status).toBe(404);
    expect(missing.headers['content-type']).toContain('application/problem+json');
  });

  it("Swagger UI's admin server is the listener that served it (any port), and its version is package.json's", async () => {
    const served = await t.admin('GET', '/openapi.json', undefined, null);
    const document = served.body as { info: { version: string }; servers: { url: string }[] };
    const pkg = JSON.parse(readFileSync(join(__dirname, '../../package.json'), 'utf8')) as {
      version: string;
    };
    expect(document.info.version).toBe(pkg.version);
    // A relative URL: "Try it out" resolves it against the page, so on this plane's random port the
    // call (and its bearer token) goes to this listener, never to a fixed 127.0.0.1:8080.
    expect(document.servers.map((s) => s.url)).toEqual(['/']);
    const init = await t.admin('GET', `/${SWAGGER_UI_PATH}/swagger-ui-init.js`, undefined, null);
    // No absolute admin (plain http) URL anywhere in the page's script; the ingress's https one stays.
    expect(init.raw).not.toMatch(/http:\/\/|8080/);
    const page = new URL(`/${SWAGGER_UI_PATH}`, t.plane.adminUrl);
    const target = new URL(`${document.servers[0]!.url.replace(/\/$/, '')}/api/v1/workers`, page);
    expect(target.origin).toBe(new URL(t.plane.adminUrl).origin);
    const res = await fetch(target, { headers: { authorization: `Bearer ${t.viewerToken}` } });
    expect(res.status).toBe(200);
  });

  it('an unknown admin route is a problem+json 404', async () => {
    const res = await t.admin('GET', '/api/v1/nothing');
    expect(res.status).toBe(404);
    expect(res.body).toMatchObject({ code: 'route_not_found' });
  });

  it('readiness turns 503 once shutdown begins', async () => {
    t.plane.core.readiness.markStopping();
    const res = await t.admin('GET', '/readyz', undefined, null);
    expect(res.status).toBe(503);
    expect(res.body).toMatchObject({
      code: 'unavailable',
      checks: { details: { lifecycle: { status: 'down', state: 'stopping' } } },
    });
  });
});

describe('cluster-control readiness', () => {
  it('is 503 until the migrations are applied, then 200', async () => {
    const empty = await createPostgresDatabase();
    const pki = await createTestPki(['worker-a']);
    // An unmigrated database: drop the schema the template carries.
    const raw = await PostgresDatabase.open({ url: empty.url }, false);
    await raw.run('DROP SCHEMA public CASCADE');
    await raw.run('CREATE SCHEMA public');
    await raw.close();
    const t = await startTestPlane(
      { dialect: 'postgres', url: empty.url, dispose: () => empty.drop() },
      pki,
      {},
      { seedKeys: false },
    );
    try {
      const before = await t.admin('GET', '/readyz', undefined, null);
      expect(before.status).toBe(503);
      expect(before.body).toMatchObject({
        code: 'unavailable',
        checks: { details: { database: { status: 'down' } } },
      });
      const { runMigrations } = await import('@ql/persistence');
      await runMigrations({ dialect: 'postgres', url: empty.url });
      expect((await t.admin('GET', '/readyz', undefined, null)).status).toBe(200);
    } finally {
      await t.close();
      await empty.drop();
      pki.remove();
    }
  });
});
