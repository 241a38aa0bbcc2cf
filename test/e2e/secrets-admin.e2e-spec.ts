// Secrets on the admin API (issue 19 items 5 and 8, ADR 0050) on both dialects: create, replace,
// list, delete, roles, refused bodies changing nothing, tasks that map secrets, the value in no
// answer, audit row, log line or database byte, and a start whose key is missing or wrong refused.
import { randomBytes } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';
import { ConfigError, loadConfig } from '../../apps/control-plane/src/config/config';
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

const PATH = '/api/v1/secrets';
const KEY = randomBytes(32).toString('base64');
const SECRET_ENV = { QL_SECRETS_KEY: KEY, QL_SECRETS_KEY_ID: 'k1' };
const VALUE = 'pt_key=AAAA-e2e-secret-value;pt_pin=jd_e2e;';
const OTHER = 'pt_key=BBBB-e2e-other-value;pt_pin=jd_e2e;';

describe.each<Dialect>(['sqlite', 'postgres'])('secrets, admin API (%s)', (dialect) => {
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

  it('create answers metadata only; replace moves updatedAt; a second create is 409; replace of an unknown name 404', async () => {
    const created = await t.admin('POST', PATH, { name: 'jd-cookie', value: VALUE });
    expect(created.status).toBe(201);
    expect(created.body).toEqual({
      name: 'jd-cookie',
      keyId: 'k1',
      createdAt: expect.any(String),
      updatedAt: expect.any(String),
      usedBy: [],
      created: true,
    });
    expect(created.raw).not.toContain(VALUE);
    await unchanged(async () => {
      const again = await t.admin('POST', PATH, { name: 'jd-cookie', value: OTHER });
      expect(again).toMatchObject({ status: 409, body: { code: 'conflict', reason: 'secret_exists' } });
      const unknown = await t.admin('PUT', `${PATH}/nobody`, { value: OTHER });
      expect(unknown).toMatchObject({ status: 404, body: { code: 'not_found' } });
    });
    const replaced = await t.admin('PUT', `${PATH}/jd-cookie`, { value: OTHER });
    expect(replaced).toMatchObject({ status: 200, body: { name: 'jd-cookie', created: false } });
    expect(replaced.raw).not.toContain(OTHER);
    const one = await t.admin('GET', `${PATH}/jd-cookie`, undefined, t.viewerToken);
    expect(one).toMatchObject({ status: 200, body: { name: 'jd-cookie', usedBy: [] } });
    expect(one.raw).not.toMatch(/e2e-(secret|other)-value/);
  });

  it('a task maps existing secrets only; the list names the task; a mapped secret is not deleted until no task maps it', async () => {
    await t.admin('POST', PATH, { name: 'jd-cookie-2', value: VALUE });
    await unchanged(async () => {
      const refused = await t.admin('POST', '/api/v1/tasks', {
        name: 'jd-bean',
        command: 'node jd_bean.js',
        runtime: 'node',
        secretEnv: { JD_COOKIE: 'jd-cookie-2&no-such-secret' },
      });
      expect(refused).toMatchObject({
        status: 400,
        body: {
          code: 'invalid_request',
          detail: 'secretEnv: unknown_secret: no secret is named no-such-secret',
        },
      });
    });
    const task = await t.admin('POST', '/api/v1/tasks', {
      name: 'jd-bean',
      command: 'node jd_bean.js',
      runtime: 'node',
      secretEnv: { JD_COOKIE: 'jd-cookie-2&jd-cookie' },
    });
    expect(task.status).toBe(201);
    const taskId = (task.body as { id: string }).id;
    expect((task.body as { spec: { secretEnv: unknown } }).spec.secretEnv).toEqual({
      JD_COOKIE: 'jd-cookie-2&jd-cookie',
    });
    const list = await t.admin('GET', PATH, undefined, t.viewerToken);
    expect((list.body as { items: unknown[] }).items).toEqual([
      expect.objectContaining({ name: 'jd-cookie', usedBy: [taskId] }),
      expect.objectContaining({ name: 'jd-cookie-2', usedBy: [taskId] }),
    ]);
    await unchanged(async () => {
      const inUse = await t.admin('DELETE', `${PATH}/jd-cookie-2`);
      expect(inUse).toMatchObject({ status: 409, body: { reason: 'secret_in_use' } });
      expect((inUse.body as { detail: string }).detail).toContain(taskId);
    });
    // A change of mapping is a new revision; the secret it no longer maps is free.
    const updated = await t.admin('PUT', `/api/v1/tasks/${taskId}`, {
      name: 'jd-bean',
      command: 'node jd_bean.js',
      runtime: 'node',
      secretEnv: { JD_COOKIE: 'jd-cookie' },
    });
    expect(updated).toMatchObject({ status: 200, body: { revision: 2, changed: true } });
    const deleted = await t.admin('DELETE', `${PATH}/jd-cookie-2`);
    expect(deleted).toMatchObject({ status: 200, body: { name: 'jd-cookie-2', deleted: true } });
    expect((await t.admin('GET', `${PATH}/jd-cookie-2`)).status).toBe(404);
  });

  it('a viewer lists but cannot create, replace or delete (403); no key is 401; nothing changes', async () => {
    await unchanged(async () => {
      const answers = [
        await t.admin('POST', PATH, { name: 'viewer-made', value: VALUE }, t.viewerToken),
        await t.admin('PUT', `${PATH}/jd-cookie`, { value: VALUE }, t.viewerToken),
        await t.admin('DELETE', `${PATH}/jd-cookie`, undefined, t.viewerToken),
      ];
      for (const res of answers) expect(res).toMatchObject({ status: 403, body: { code: 'forbidden' } });
      expect((await t.admin('GET', PATH, undefined, null)).status).toBe(401);
    });
  });

  it.each<[string, string, string, unknown, string]>([
    ['an unknown field', 'POST', PATH, { name: 'a', value: 'v', env: 'X' }, 'env: unknown_field'],
    ['a name with &', 'POST', PATH, { name: 'a&b', value: 'v' }, 'name: invalid_format'],
    ['a long name', 'POST', PATH, { name: 'a'.repeat(129), value: 'v' }, 'name: too_long'],
    ['an empty value', 'POST', PATH, { name: 'a', value: '' }, 'value: too_short'],
    ['a NUL in the value', 'POST', PATH, { name: 'a', value: 'a\u0000b' }, 'value: control_character'],
    ['a value over 64 KiB', 'POST', PATH, { name: 'a', value: 'x'.repeat(64 * 1024 + 1) }, 'value: too_long'],
    ['a value as a number', 'POST', PATH, { name: 'a', value: 5 }, 'value: must_be_string'],
    [
      'a name in a replace body',
      'PUT',
      `${PATH}/jd-cookie`,
      { name: 'b', value: 'v' },
      'name: unknown_field',
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

  it('a value of exactly 64 KiB of UTF-8 is taken', async () => {
    const res = await t.admin('POST', PATH, { name: 'big', value: 'é'.repeat(32 * 1024) });
    expect(res.status).toBe(201);
  });

  it('no value is in the database bytes, the audit log or anything the control plane logged', async () => {
    const audit = await t.admin('GET', '/api/v1/audit?limit=50');
    const actions = (audit.body as { items: { action: string }[] }).items.map((e) => e.action);
    expect(actions).toEqual(expect.arrayContaining(['secret.create', 'secret.replace', 'secret.delete']));
    const everything = [
      audit.raw,
      JSON.stringify(await snapshotDatabase(t.plane.core.db)),
      ...log.lines,
    ].join('\n');
    for (const value of [VALUE, OTHER, 'e2e-secret-value', 'e2e-other-value'])
      expect(everything).not.toContain(value);
    expect(log.lines.some((l) => l.includes('secret created'))).toBe(true);
  });

  it('without QL_SECRETS_KEY a plane on this database does not start (secrets are stored); a wrong key neither', async () => {
    const tries: [Record<string, string>, RegExp][] = [
      [{}, /secrets are stored \(under key id k1\) but QL_SECRETS_KEY is not set/],
      [
        { QL_SECRETS_KEY: randomBytes(32).toString('base64'), QL_SECRETS_KEY_ID: 'k1' },
        /wrong key under that id/,
      ],
      [
        { QL_SECRETS_KEY: randomBytes(32).toString('base64'), QL_SECRETS_KEY_ID: 'k2' },
        /key id k1, which is not configured/,
      ],
    ];
    for (const [env, message] of tries) {
      const error = await startTestPlane(db, pki, env, { seedKeys: false }).then(
        async (plane) => {
          await plane.close();
          return null;
        },
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(ConfigError);
      expect((error as Error).message).toMatch(message);
    }
  });

  it('rotation through the previous key: a plane with the new key and the old one as previous starts', async () => {
    const next = randomBytes(32).toString('base64');
    const rotated = await startTestPlane(
      db,
      pki,
      { QL_SECRETS_KEY: next, QL_SECRETS_KEY_ID: 'k2', QL_SECRETS_PREVIOUS_KEYS: `k1:${KEY}` },
      { seedKeys: false },
    );
    try {
      const result = await rotated.plane.core.repositories.secrets.rotate({
        actor: 'test',
        action: 'secret.rotate',
        target: 'secrets',
      });
      expect(result.reencrypted).toBeGreaterThan(0);
    } finally {
      await rotated.close();
    }
    // Only the new key from now on; the old one alone is refused.
    const onlyNew = await startTestPlane(
      db,
      pki,
      { QL_SECRETS_KEY: next, QL_SECRETS_KEY_ID: 'k2' },
      { seedKeys: false },
    );
    await onlyNew.close();
    await expect(startTestPlane(db, pki, SECRET_ENV, { seedKeys: false })).rejects.toThrow(/key id k2/);
  });
});

describe('secrets without a key (sqlite)', () => {
  let db: TestDatabase;
  let pki: Awaited<ReturnType<typeof createTestPki>>;
  let t: TestPlane;
  beforeAll(async () => {
    db = await createTestDatabase('sqlite');
    pki = await createTestPki([]);
    t = await startTestPlane(db, pki);
  });
  afterAll(async () => {
    await t?.close();
    await db?.dispose();
    pki?.remove();
  });

  it('creating one answers 503 and writes nothing; the list answers empty', async () => {
    const before = await snapshotDatabase(t.plane.core.db);
    const res = await t.admin('POST', PATH, { name: 'a', value: 'v' });
    expect(res).toMatchObject({ status: 503, body: { code: 'unavailable' } });
    expect((res.body as { detail: string }).detail).toMatch(/QL_SECRETS_KEY/);
    expect(await snapshotDatabase(t.plane.core.db)).toEqual(before);
    expect((await t.admin('GET', PATH)).body).toEqual({ items: [], nextAfter: null });
  });

  it('a malformed key is a configuration error', () => {
    expect(() => loadConfig({ QL_SECRETS_KEY: 'c2hvcnQ=' })).toThrow(
      /QL_SECRETS_KEY must be 32 random bytes in base64/,
    );
  });
});
