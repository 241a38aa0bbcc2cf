// Global env vars on the admin API (issue 31 item 2, ADR 0061) on both dialects: create, change,
// reorder, page, delete; roles; refused bodies answered with the field and rule, changing nothing; a
// secret variable's value in no answer, audit row, log line or database byte; the secrets API keeps
// its hands off the secrets that hold variables' values.
import { randomBytes } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';
import { snapshotDatabase } from '../support/db-snapshot';
import {
  Dialect,
  TestDatabase,
  TestPlane,
  createTestDatabase,
  createTestPki,
  startTestPlane,
} from '../support/test-plane';
import { CapturedLog } from '../support/captured-log';

const PATH = '/api/v1/env-vars';
const SECRET_ENV = { QL_SECRETS_KEY: randomBytes(32).toString('base64'), QL_SECRETS_KEY_ID: 'k1' };
const COOKIES = 'pt_key=AAAA-e2e-env-one;pt_pin=jd_1;&pt_key=BBBB-e2e-env-two;pt_pin=jd_2;';
const NEW_COOKIES = 'pt_key=CCCC-e2e-env-three;pt_pin=jd_3;\npt_key=DDDD-e2e-env-four;pt_pin=jd_4;';
const SECRET_TEXT = /e2e-env-(one|two|three|four)/;

interface View {
  name: string;
  secret: boolean;
  value: string | null;
  remark: string;
  enabled: boolean;
  position: number;
  version: number;
}

describe.each<Dialect>(['sqlite', 'postgres'])('env vars, admin API (%s)', (dialect) => {
  let db: TestDatabase;
  let pki: Awaited<ReturnType<typeof createTestPki>>;
  let t: TestPlane;
  const log = new CapturedLog();

  beforeAll(async () => {
    db = await createTestDatabase(dialect);
    pki = await createTestPki([]);
    t = await startTestPlane(db, pki, { ...SECRET_ENV, QL_LOG_LEVEL: 'debug' }, { logger: log });
  });
  afterAll(async () => {
    await t?.close();
    await db?.dispose();
    pki?.remove();
  });

  const unchanged = async (action: () => Promise<unknown>) => {
    const before = await snapshotDatabase(t.plane.core.db);
    await action();
    const after = await snapshotDatabase(t.plane.core.db);
    expect(Object.keys(after).filter((k) => !isDeepStrictEqual(after[k], before[k]))).toEqual([]);
  };
  const items = async (query = '') =>
    ((await t.admin('GET', `${PATH}${query}`, undefined, t.viewerToken)).body as { items: View[] }).items;

  it('creates a plain and a secret variable; answers the plain value, never the secret one; pages by position', async () => {
    const plain = await t.admin('POST', PATH, {
      name: 'JD_UA',
      value: 'jdapp;iPhone;京东&more',
      remark: '京东 UA，所有任务共用 🫘',
    });
    expect(plain).toMatchObject({
      status: 201,
      body: {
        name: 'JD_UA',
        secret: false,
        value: 'jdapp;iPhone;京东&more',
        remark: '京东 UA，所有任务共用 🫘',
        enabled: true,
        position: 1,
        version: 1,
      },
    });
    const secret = await t.admin('POST', PATH, {
      name: 'JD_COOKIE',
      value: COOKIES,
      secret: true,
      remark: '两个京东账号',
    });
    expect(secret).toMatchObject({
      status: 201,
      body: { name: 'JD_COOKIE', secret: true, value: null, position: 2, version: 1 },
    });
    expect(secret.raw).not.toMatch(SECRET_TEXT);
    await t.admin('POST', PATH, { name: 'QL_NOTIFY', value: 'bark', enabled: false });
    const first = await t.admin('GET', `${PATH}?limit=2`, undefined, t.viewerToken);
    expect(first.body).toMatchObject({ nextAfter: 'JD_COOKIE' });
    expect((first.body as { items: View[] }).items.map((v) => v.name)).toEqual(['JD_UA', 'JD_COOKIE']);
    expect((await items('?after=JD_COOKIE&limit=2')).map((v) => v.name)).toEqual(['QL_NOTIFY']);
    const one = await t.admin('GET', `${PATH}/JD_COOKIE`, undefined, t.viewerToken);
    expect(one).toMatchObject({
      status: 200,
      body: { name: 'JD_COOKIE', value: null, remark: '两个京东账号' },
    });
    expect(one.raw).not.toMatch(SECRET_TEXT);
    // The secrets list shows the secret that holds it, metadata only.
    const secrets = await t.admin('GET', '/api/v1/secrets', undefined, t.viewerToken);
    expect((secrets.body as { items: { name: string }[] }).items.map((s) => s.name)).toContain(
      'env.JD_COOKIE',
    );
  });

  it('changes value, remark and enabled; the version counts value changes; reorders; refuses a kind change and an order that leaves one out', async () => {
    const replaced = await t.admin('PATCH', `${PATH}/JD_COOKIE`, { value: NEW_COOKIES });
    expect(replaced).toMatchObject({ status: 200, body: { version: 2, value: null } });
    expect(replaced.raw).not.toMatch(SECRET_TEXT);
    const toggled = await t.admin('PATCH', `${PATH}/QL_NOTIFY`, { enabled: true, remark: '通知：Bark' });
    expect(toggled).toMatchObject({ status: 200, body: { enabled: true, remark: '通知：Bark', version: 1 } });
    await unchanged(async () => {
      const kind = await t.admin('PATCH', `${PATH}/JD_UA`, { secret: true });
      expect(kind).toMatchObject({
        status: 400,
        body: { code: 'invalid_request', detail: 'secret: immutable' },
      });
      const empty = await t.admin('PATCH', `${PATH}/JD_UA`, {});
      expect(empty).toMatchObject({
        status: 400,
        body: { detail: 'body: empty_change: give value, remark or enabled' },
      });
      const missing = await t.admin('PUT', `${PATH}/order`, { names: ['QL_NOTIFY', 'JD_UA'] });
      expect(missing).toMatchObject({ status: 409, body: { code: 'conflict', reason: 'order_mismatch' } });
      expect((missing.body as { detail: string }).detail).toContain('JD_COOKIE');
      const unknown = await t.admin('PATCH', `${PATH}/NOBODY`, { enabled: false });
      expect(unknown).toMatchObject({ status: 404, body: { code: 'not_found' } });
      const twice = await t.admin('POST', PATH, { name: 'JD_UA', value: 'x' });
      expect(twice).toMatchObject({ status: 409, body: { reason: 'env_var_exists' } });
    });
    const order = await t.admin('PUT', `${PATH}/order`, { names: ['QL_NOTIFY', 'JD_COOKIE', 'JD_UA'] });
    expect(order.status).toBe(200);
    expect((order.body as { items: View[] }).items.map((v) => `${v.position}:${v.name}`)).toEqual([
      '1:QL_NOTIFY',
      '2:JD_COOKIE',
      '3:JD_UA',
    ]);
    expect((await items()).map((v) => v.name)).toEqual(['QL_NOTIFY', 'JD_COOKIE', 'JD_UA']);
  });

  it.each<[string, string, string, unknown, string]>([
    ['a name not a shell name', 'POST', PATH, { name: '1JD', value: 'v' }, 'name: invalid_format'],
    ['a name with -', 'POST', PATH, { name: 'JD-COOKIE', value: 'v' }, 'name: invalid_format'],
    ['an unknown field', 'POST', PATH, { name: 'A', value: 'v', env: 'x' }, 'env: unknown_field'],
    [
      'a plain value with a line feed',
      'POST',
      PATH,
      { name: 'A', value: 'a\nb' },
      'value: control_character',
    ],
    ['a plain value over 4 KiB', 'POST', PATH, { name: 'A', value: 'x'.repeat(4097) }, 'value: too_long'],
    [
      'a secret value with NUL',
      'POST',
      PATH,
      { name: 'A', value: 'a\u0000', secret: true },
      'value: control_character',
    ],
    [
      'a remark with a bidi override',
      'POST',
      PATH,
      { name: 'A', value: 'v', remark: '京东\u202e签到' },
      'remark: format_character',
    ],
    [
      'a remark over 200 characters',
      'POST',
      PATH,
      { name: 'A', value: 'v', remark: '京'.repeat(201) },
      'remark: too_long',
    ],
    [
      'enabled as a string',
      'POST',
      PATH,
      { name: 'A', value: 'v', enabled: 'true' },
      'enabled: must_be_boolean',
    ],
    ['a name in a change', 'PATCH', `${PATH}/JD_UA`, { name: 'B' }, 'name: unknown_field'],
    ['a name with - in the path', 'PATCH', `${PATH}/JD-UA`, { enabled: true }, 'name: invalid_format'],
    [
      'a duplicate in an order',
      'PUT',
      `${PATH}/order`,
      { names: ['JD_UA', 'JD_UA'] },
      'names: duplicate_item',
    ],
  ])(
    '%s is 400 naming the field, and the database is unchanged',
    async (_what, method, path, body, detail) => {
      await unchanged(async () => {
        const res = await t.admin(method, path, body);
        expect(res).toMatchObject({ status: 400, body: { code: 'invalid_request', detail } });
      });
    },
  );

  it('a viewer reads but cannot write (403); no key is 401; the secrets API neither writes nor deletes a variable’s secret', async () => {
    await unchanged(async () => {
      const answers = [
        await t.admin('POST', PATH, { name: 'VIEWER', value: 'v' }, t.viewerToken),
        await t.admin('PATCH', `${PATH}/JD_UA`, { enabled: false }, t.viewerToken),
        await t.admin('PUT', `${PATH}/order`, { names: ['JD_UA'] }, t.viewerToken),
        await t.admin('DELETE', `${PATH}/JD_UA`, undefined, t.viewerToken),
      ];
      for (const res of answers) expect(res).toMatchObject({ status: 403, body: { code: 'forbidden' } });
      expect((await t.admin('GET', PATH, undefined, null)).status).toBe(401);
      const write = await t.admin('POST', '/api/v1/secrets', { name: 'env.JD_COOKIE', value: 'stolen' });
      expect(write).toMatchObject({
        status: 400,
        body: { detail: expect.stringMatching(/^name: reserved_prefix/) },
      });
      const replace = await t.admin('PUT', '/api/v1/secrets/env.JD_COOKIE', { value: 'stolen' });
      expect(replace).toMatchObject({
        status: 400,
        body: { detail: expect.stringMatching(/^name: reserved_prefix/) },
      });
      const remove = await t.admin('DELETE', '/api/v1/secrets/env.JD_COOKIE');
      expect(remove).toMatchObject({ status: 409, body: { reason: 'env_var_secret' } });
    });
  });

  it('deletes a secret variable with its secret; no secret value is in the database, the audit log or the log lines', async () => {
    const deleted = await t.admin('DELETE', `${PATH}/JD_COOKIE`);
    expect(deleted).toMatchObject({ status: 200, body: { name: 'JD_COOKIE', deleted: true } });
    expect((await t.admin('GET', `${PATH}/JD_COOKIE`)).status).toBe(404);
    expect((await t.admin('GET', '/api/v1/secrets/env.JD_COOKIE')).status).toBe(404);
    const audit = await t.admin('GET', '/api/v1/audit?limit=50');
    const actions = (audit.body as { items: { action: string }[] }).items.map((e) => e.action);
    expect(actions).toEqual(
      expect.arrayContaining(['env_var.create', 'env_var.update', 'env_var.reorder', 'env_var.delete']),
    );
    const everything = [
      audit.raw,
      JSON.stringify(await snapshotDatabase(t.plane.core.db)),
      ...log.lines,
    ].join('\n');
    expect(everything).not.toMatch(SECRET_TEXT);
    expect(log.lines.some((l) => l.includes('env var created'))).toBe(true);
  });

  it('imports an export file: the report only without apply; with apply once; a second import changes nothing', async () => {
    const content = [
      '# 青龙 config.sh',
      `export JD_COOKIE="${COOKIES}"`,
      'export JD_UA="jdapp;Android"',
      "export QL_BARK_KEY='import-e2e-bark'",
      'echo not an export',
    ].join('\n');
    const body = { content, plain: ['QL_BARK_KEY'] };
    let report: unknown;
    await unchanged(async () => {
      const dry = await t.admin('POST', `${PATH}/import`, body);
      expect(dry.status).toBe(200);
      report = dry.body;
    });
    expect(report).toEqual({
      applied: false,
      create: ['JD_COOKIE', 'QL_BARK_KEY'],
      update: [],
      unchanged: [],
      // JD_UA exists as a plain variable: imported as a secret it is refused, not changed.
      refused: [{ at: 'JD_UA', reason: expect.stringContaining('exists as plain') }],
      skipped: [{ at: 'line 5', reason: 'not an export line' }],
    });
    const applied = await t.admin('POST', `${PATH}/import`, { ...body, apply: true });
    expect(applied.body).toMatchObject({ applied: true, create: ['JD_COOKIE', 'QL_BARK_KEY'] });
    expect(applied.raw).not.toMatch(SECRET_TEXT);
    expect(JSON.stringify(await snapshotDatabase(t.plane.core.db))).not.toMatch(SECRET_TEXT);
    expect(await t.admin('GET', `${PATH}/QL_BARK_KEY`)).toMatchObject({
      body: { secret: false, value: 'import-e2e-bark', enabled: true },
    });
    await unchanged(async () => {
      const again = await t.admin('POST', `${PATH}/import`, { ...body, apply: true });
      expect(again.body).toMatchObject({
        applied: true,
        create: [],
        update: [],
        unchanged: ['JD_COOKIE', 'QL_BARK_KEY'],
      });
    });
    const viewer = await t.admin('POST', `${PATH}/import`, { ...body, apply: true }, t.viewerToken);
    expect(viewer.status).toBe(403);
  });
});
