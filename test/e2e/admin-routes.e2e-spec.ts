import { randomBytes } from 'node:crypto';
import { ingressPath } from '@ql/contracts';
import { SWAGGER_UI_PATH } from '../../apps/control-plane/src/api-docs';
import { HandlerRoute, handlerRoutes, registeredRoutes, routeKey } from '../support/admin-routes';
import { snapshotDatabase } from '../support/db-snapshot';
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

/**
 * Route-table-driven checks of the admin listener: every route's role, every integer parameter.
 * The tables come from the running application (its route tree, its controllers' metadata, its
 * OpenAPI document), so a new route is checked without anyone remembering to add it here.
 */

/** The routes a viewer key may use; every other non-public route must be marked admin. */
const VIEWER_ROUTES = [
  'GET /api/v1/bundles',
  'GET /api/v1/bundles/:digest',
  'GET /api/v1/enrollment-tokens',
  'GET /api/v1/workers',
  'GET /api/v1/workers/:workerId',
  'GET /api/v1/tasks',
  'GET /api/v1/tasks/:taskId',
  'GET /api/v1/tasks/:taskId/revisions',
  'GET /api/v1/runs',
  'GET /api/v1/runs/:runId',
  'GET /api/v1/runs/:runId/logs',
  'GET /api/v1/session',
  'DELETE /api/v1/session',
  'GET /api/v1/secrets',
  'GET /api/v1/secrets/:name',
  'GET /api/v1/env-vars',
  'GET /api/v1/env-vars/:name',
  'GET /metrics',
];

/** Viewer routes about the caller's own console session: a key is let in, and holds no session (404). */
const SESSION_ONLY = ['GET /api/v1/session', 'DELETE /api/v1/session'];

/** Query strings that are not plain decimal digits (as sent, percent-encoded where needed). */
const NOT_DECIMAL = [
  '0x10',
  '1e2',
  '%205', // ' 5'
  '+5', // a query '+' is a space
  '%2B5', // '+5'
  '5%20',
  '%095', // a tab
  '-1',
  '05',
  '007',
  '5.0',
  '5.',
  '',
  '1_0',
  '0b1',
  '0o7',
  'Infinity',
  'NaN',
  '%D9%A1', // ARABIC-INDIC DIGIT ONE
  '%EF%BC%95', // FULLWIDTH DIGIT FIVE
];

describe.each<Dialect>(['sqlite', 'postgres'])('admin routes, table-driven (%s)', (dialect) => {
  let db: TestDatabase;
  let pki: Awaited<ReturnType<typeof createTestPki>>;
  let t: TestPlane;
  let params: Record<string, string>;
  let routes: HandlerRoute[];
  let openApiPaths: Record<string, Record<string, unknown>>;

  const taskBody = (name: string) => ({ name, command: 'echo hi', runtime: 'shell' });
  /** A request each route would accept from an admin, so a 403 is the role check and nothing else. */
  const sample = (route: HandlerRoute) => {
    const path = route.url.replace(/:(\w+)/g, (_m, name: string) => {
      if (!(name in params)) throw new Error(`no sample value for :${name} in ${routeKey(route)}`);
      return params[name]!;
    });
    const bodies: Record<string, unknown> = {
      'POST /api/v1/api-keys': { name: 'made-by-a-viewer', role: 'admin' },
      'POST /api/v1/certificates/revoke': { fingerprint: 'ab'.repeat(32) },
      'POST /api/v1/enrollment-tokens': { workerId: 'made-by-a-viewer' },
      'POST /api/v1/tasks': taskBody('made-by-a-viewer'),
      'PUT /api/v1/tasks/:taskId': taskBody('edited-by-a-viewer'),
      'POST /api/v1/tasks/:taskId/runs': {},
      'POST /api/v1/secrets': { name: 'made-by-a-viewer', value: 'v' },
      'PUT /api/v1/secrets/:name': { value: 'replaced-by-a-viewer' },
      'POST /api/v1/env-vars': { name: 'MADE_BY_A_VIEWER', value: 'v' },
      'PATCH /api/v1/env-vars/:name': { enabled: false },
      'PUT /api/v1/env-vars/order': { names: ['roles'] },
    };
    return { path, body: bodies[routeKey(route)] };
  };

  beforeAll(async () => {
    db = await createTestDatabase(dialect);
    pki = await createTestPki(['worker-a']);
    t = await startTestPlane(db, pki, { QL_SECRETS_KEY: randomBytes(32).toString('base64') });
    expect((await t.admin('POST', '/api/v1/secrets', { name: 'roles', value: 'v' })).status).toBe(201);
    expect((await t.admin('POST', '/api/v1/env-vars', { name: 'roles', value: 'v' })).status).toBe(201);
    const reg = await t.ingress(
      readPair(pki.workers['worker-a']!),
      ingressPath('worker-a', newSessionId(), 'register'),
      registerBody(),
    );
    expect(reg.status).toBe(200);
    const task = await t.admin('POST', '/api/v1/tasks', taskBody('roles'));
    const taskId = (task.body as { id: string }).id;
    const run = await t.admin('POST', `/api/v1/tasks/${taskId}/runs`, {});
    // Ended, so a log tail sampled with `wait=` answers at once instead of holding the request.
    const runId = (run.body as { run: { id: string } }).run.id;
    expect((await t.admin('POST', `/api/v1/runs/${runId}/cancel`)).body).toMatchObject({
      status: 'cancelled',
    });
    const key = await t.admin('POST', '/api/v1/api-keys', { name: 'spare', role: 'viewer' });
    const bundle = await t.admin('POST', '/api/v1/bundles?name=a.js', undefined, undefined, {
      rawBody: Buffer.from('console.log(1)\n'),
      headers: { 'content-type': 'application/octet-stream' },
    });
    expect(bundle.status).toBe(200);
    params = {
      digest: (bundle.body as { digest: string }).digest,
      workerId: 'worker-a',
      taskId,
      runId,
      id: (key.body as { id: string }).id,
      name: 'roles',
    };
    routes = handlerRoutes(t.plane.admin);
    const document = await t.admin('GET', '/openapi.json', undefined, null);
    openApiPaths = (document.body as { paths: typeof openApiPaths }).paths;
  });
  afterAll(async () => {
    await t?.close();
    await db?.dispose();
    pki?.remove();
  });

  it('the controllers declare exactly the routes the listener serves; every non-public one is admin or an expected viewer route', () => {
    // Swagger UI's page and assets are Fastify routes outside Nest: public, no guard, no handler.
    const swaggerUi = (url: string) =>
      url === `/${SWAGGER_UI_PATH}` || url.startsWith(`/${SWAGGER_UI_PATH}/`);
    const served = registeredRoutes(t.plane.admin).filter((r) => !swaggerUi(r.url));
    expect(routes.map(routeKey).sort()).toEqual(served.map(routeKey).sort());
    const admin = routes.filter((r) => r.role === 'admin').map(routeKey);
    const viewer = routes.filter((r) => r.role === 'viewer').map(routeKey);
    expect(admin.length).toBeGreaterThanOrEqual(13);
    // A route that lost its @RequireRole('admin') becomes a viewer route no one expected.
    expect(viewer.sort()).toEqual([...VIEWER_ROUTES].sort());
    expect(routes.filter((r) => r.role === 'public').map(routeKey)).toEqual(
      expect.arrayContaining(['GET /livez', 'GET /readyz', 'GET /openapi.json']),
    );
  });

  it('a viewer key on every admin route is 403 forbidden after the key lookup alone, and changes nothing', async () => {
    const adminRoutes = routes.filter((r) => r.role === 'admin');
    expect(adminRoutes.length).toBeGreaterThan(0);
    for (const route of adminRoutes) {
      const { path, body } = sample(route);
      const before = await snapshotDatabase(t.plane.core.db);
      const statements = t.statements();
      const res = await t.admin(route.method, path, body, t.viewerToken, {
        headers: { 'idempotency-key': `viewer-${randomBytes(4).toString('hex')}` },
      });
      const used = t.statements() - statements;
      expect({
        route: routeKey(route),
        status: res.status,
        code: (res.body as { code?: string }).code,
      }).toEqual({ route: routeKey(route), status: 403, code: 'forbidden' });
      expect({ route: routeKey(route), statements: used }).toEqual({ route: routeKey(route), statements: 1 });
      expect(await snapshotDatabase(t.plane.core.db)).toEqual(before);
    }
  });

  it('a viewer key is served on every viewer route', async () => {
    for (const route of routes.filter((r) => r.role === 'viewer')) {
      const res = await t.admin(route.method, sample(route).path, undefined, t.viewerToken);
      const expected = SESSION_ONLY.includes(routeKey(route)) ? 404 : 200;
      expect({ route: routeKey(route), status: res.status }).toEqual({
        route: routeKey(route),
        status: expected,
      });
    }
  });

  describe('integer parameters are plain decimal digits', () => {
    /** Every integer query or path parameter the OpenAPI document lists, with its route. */
    const integerParams = () =>
      Object.entries(openApiPaths).flatMap(([path, ops]) =>
        Object.entries(ops as Record<string, { parameters?: unknown[] }>).flatMap(([method, op]) =>
          (
            (op.parameters ?? []) as {
              name: string;
              in: string;
              schema?: { type?: string; minimum?: number; maximum?: number };
            }[]
          )
            .filter((p) => (p.in === 'query' || p.in === 'path') && p.schema?.type === 'integer')
            .map((p) => ({
              route: { method: method.toUpperCase(), url: path.replace(/\{(\w+)\}/g, ':$1') },
              name: p.name,
              min: p.schema!.minimum!,
              max: p.schema!.maximum!,
            })),
        ),
      );

    it('the table covers every route that reads an integer', () => {
      expect(
        integerParams()
          .map((p) => `${routeKey(p.route)} ${p.name}`)
          .sort(),
      ).toEqual([
        'GET /api/v1/audit limit',
        'GET /api/v1/bundles limit',
        'GET /api/v1/certificates/revoked limit',
        'GET /api/v1/console-sessions limit',
        'GET /api/v1/enrollment-tokens limit',
        'GET /api/v1/env-vars limit',
        'GET /api/v1/runs limit',
        'GET /api/v1/runs/:runId/logs after',
        'GET /api/v1/runs/:runId/logs limit',
        'GET /api/v1/runs/:runId/logs wait',
        'GET /api/v1/secrets limit',
        'GET /api/v1/tasks limit',
        'GET /api/v1/tasks/:taskId/revisions before',
        'GET /api/v1/tasks/:taskId/revisions limit',
        'GET /api/v1/workers limit',
      ]);
    });

    it('anything but plain decimal digits, a repeated parameter or a value out of range is 400 naming the parameter', async () => {
      for (const { route, name, min, max } of integerParams()) {
        const path = sample({ ...route, role: 'admin' }).path;
        // Below a minimum of 0 is '-1', already not decimal digits.
        const below = min > 0 ? [String(min - 1)] : [];
        const outOfRange = [...below, String(max + 1), '9'.repeat(16), '9'.repeat(400)];
        for (const query of [...NOT_DECIMAL, ...outOfRange]
          .map((v) => `${name}=${v}`)
          .concat(`${name}=5&${name}=6`)) {
          const res = await t.admin(route.method, `${path}?${query}`);
          expect({ query, path, status: res.status, body: res.body }).toEqual({
            query,
            path,
            status: 400,
            body: expect.objectContaining({
              code: 'invalid_request',
              detail: expect.stringMatching(`^${name}: `),
            }),
          });
        }
        for (const value of ['1', String(max)]) {
          const res = await t.admin(route.method, `${path}?${name}=${value}`);
          expect({ path, value, status: res.status }).toEqual({ path, value, status: 200 });
        }
      }
    });
  });
});
