import { snapshotDatabase } from '../support/db-snapshot';
import { ManualClock } from '../support/fixtures';
import {
  Dialect,
  TestDatabase,
  TestPlane,
  createTestDatabase,
  createTestPki,
  startTestPlane,
} from '../support/test-plane';

/** The web console's sign-in (ADR 0052): an API key exchanged for an HttpOnly session cookie. */

const cookieOf = (res: { headers: Record<string, unknown> }) => {
  const header = res.headers['set-cookie'] as string[] | undefined;
  expect(header).toHaveLength(1);
  return header![0]!;
};
const tokenOf = (setCookie: string) => /^ql_session=(qls_[A-Za-z0-9_-]{43});/.exec(setCookie)![1]!;
const taskBody = (name: string) => ({ name, command: 'echo hi', runtime: 'shell' });

describe.each<Dialect>(['sqlite', 'postgres'])('console sessions (%s)', (dialect) => {
  let db: TestDatabase;
  let pki: Awaited<ReturnType<typeof createTestPki>>;
  let t: TestPlane;

  beforeAll(async () => {
    db = await createTestDatabase(dialect);
    pki = await createTestPki([]);
    t = await startTestPlane(db, pki);
  });
  afterAll(async () => {
    await t?.close();
    await db?.dispose();
    pki?.remove();
  });

  /** Signs in with `key`; the cookie's token and the session's CSRF token. */
  async function signIn(key: string) {
    const res = await t.admin('POST', '/api/v1/session', { apiKey: key }, null);
    expect(res.status).toBe(201);
    const token = tokenOf(cookieOf(res));
    return { token, csrf: (res.body as { csrfToken: string }).csrfToken, res };
  }
  /** A request the way the console's page sends it: the cookie, no Authorization header. */
  const asConsole = (
    s: { token: string; csrf?: string },
    method: string,
    path: string,
    body?: unknown,
    extra: Record<string, string> = {},
  ) =>
    t.admin(method, path, body, null, {
      headers: {
        cookie: `theme=dark; ql_session=${s.token}`,
        ...(s.csrf ? { 'x-csrf-token': s.csrf } : {}),
        ...extra,
      },
    });

  it('signing in sets an HttpOnly, SameSite=Strict cookie (not Secure over plain HTTP) and stores no secret', async () => {
    const { token, csrf, res } = await signIn(t.adminToken);
    const cookie = cookieOf(res);
    expect(cookie.split('; ').slice(1).sort()).toEqual(['HttpOnly', 'Path=/', 'SameSite=Strict']);
    expect(res.headers['cache-control']).toBe('no-store');
    expect(res.body).toEqual({
      id: expect.any(String),
      role: 'admin',
      keyName: 'test-admin',
      csrfToken: csrf,
      idleTimeoutMs: 900_000,
      expiresAt: expect.any(String),
    });
    expect(res.raw).not.toContain(t.adminToken);
    expect(res.raw).not.toContain(token);
    const stored = JSON.stringify(await snapshotDatabase(t.plane.core.db));
    for (const secret of [token, csrf, t.adminToken]) expect(stored).not.toContain(secret);
    const current = await asConsole({ token }, 'GET', '/api/v1/session');
    expect(current.status).toBe(200);
    expect(current.body).toEqual(res.body);
  });

  it('a session reads like its key; with an Authorization header the header alone decides', async () => {
    const s = await signIn(t.viewerToken);
    expect((await asConsole(s, 'GET', '/api/v1/workers')).status).toBe(200);
    const withBadHeader = await asConsole(s, 'GET', '/api/v1/workers', undefined, {
      authorization: 'Bearer qlk_' + 'A'.repeat(43),
    });
    expect(withBadHeader.status).toBe(401);
    expect((await t.admin('GET', '/api/v1/session')).status).toBe(404); // an API key holds no session
  });

  it('a change without the CSRF token, or with another session’s, is 403 csrf_token_invalid and writes nothing', async () => {
    const s = await signIn(t.adminToken);
    const other = await signIn(t.adminToken);
    const before = await snapshotDatabase(t.plane.core.db);
    for (const csrf of [undefined, other.csrf, s.csrf.slice(0, -1) + (s.csrf.endsWith('A') ? 'B' : 'A')]) {
      const res = await asConsole({ token: s.token, csrf }, 'POST', '/api/v1/tasks', taskBody('csrf-less'));
      expect(res.status).toBe(403);
      expect(res.body).toMatchObject({ code: 'csrf_token_invalid' });
    }
    expect(await snapshotDatabase(t.plane.core.db)).toEqual(before);
    const made = await asConsole(s, 'POST', '/api/v1/tasks', taskBody('with-csrf'));
    expect(made.status).toBe(201);
  });

  it("a viewer's session gets 403 on a change even with its CSRF token, and nothing is written", async () => {
    const s = await signIn(t.viewerToken);
    const before = await snapshotDatabase(t.plane.core.db);
    const res = await asConsole(s, 'POST', '/api/v1/tasks', taskBody('by-viewer'));
    expect(res.status).toBe(403);
    expect(res.body).toMatchObject({ code: 'forbidden' });
    expect(await snapshotDatabase(t.plane.core.db)).toEqual(before);
  });

  it('a wrong key, a malformed body or an unknown field signs in to nothing', async () => {
    const before = await snapshotDatabase(t.plane.core.db);
    const bodies = [
      { apiKey: 'qlk_' + 'B'.repeat(43) },
      { apiKey: 'not-a-key' },
      { apiKey: t.adminToken, remember: true },
      {},
    ];
    const statuses = [];
    for (const body of bodies) {
      const res = await t.admin('POST', '/api/v1/session', body, null);
      expect(res.headers['set-cookie']).toBeUndefined();
      statuses.push(res.status);
    }
    expect(statuses).toEqual([401, 401, 400, 400]);
    expect(await snapshotDatabase(t.plane.core.db)).toEqual(before);
  });

  it('signing out ends the session and clears the cookie; the old cookie is refused', async () => {
    const s = await signIn(t.viewerToken);
    expect((await asConsole({ token: s.token }, 'DELETE', '/api/v1/session')).status).toBe(403); // CSRF
    const out = await asConsole(s, 'DELETE', '/api/v1/session');
    expect(out.status).toBe(204);
    expect(cookieOf(out)).toMatch(/^ql_session=; Max-Age=0; /);
    const after = await asConsole(s, 'GET', '/api/v1/workers');
    expect(after.status).toBe(401);
    expect(after.body).toMatchObject({ code: 'authentication_required' });
  });

  it('an admin lists sessions (no tokens) and revokes one: its next request is refused', async () => {
    const victim = await signIn(t.viewerToken);
    const list = await t.admin('GET', '/api/v1/console-sessions?limit=200');
    expect(list.status).toBe(200);
    expect(list.raw).not.toContain(victim.token);
    expect((await t.admin('GET', '/api/v1/console-sessions', undefined, t.viewerToken)).status).toBe(403);
    const mine = await asConsole(victim, 'GET', '/api/v1/session');
    const revoked = await t.admin('DELETE', `/api/v1/console-sessions/${(mine.body as { id: string }).id}`);
    expect(revoked.status).toBe(200);
    expect(revoked.body).toMatchObject({ live: false, revokedAt: expect.any(String) });
    expect((await asConsole(victim, 'GET', '/api/v1/workers')).status).toBe(401);
  });

  it("revoking the session's API key ends the session", async () => {
    const created = await t.admin('POST', '/api/v1/api-keys', { name: 'short-lived', role: 'viewer' });
    const { id, token } = created.body as { id: string; token: string };
    const s = await signIn(token);
    expect((await asConsole(s, 'GET', '/api/v1/workers')).status).toBe(200);
    expect((await t.admin('POST', `/api/v1/api-keys/${id}/revoke`)).status).toBe(200);
    expect((await asConsole(s, 'GET', '/api/v1/workers')).status).toBe(401);
  });
});

describe('console session expiry and the Secure flag (sqlite, a clock moved by hand)', () => {
  let db: TestDatabase;
  let pki: Awaited<ReturnType<typeof createTestPki>>;
  let t: TestPlane;
  const clock = new ManualClock(Date.now());

  beforeAll(async () => {
    db = await createTestDatabase('sqlite');
    pki = await createTestPki([]);
    t = await startTestPlane(
      db,
      pki,
      {
        QL_CONSOLE_SESSION_IDLE_MS: '60000',
        QL_CONSOLE_SESSION_MAX_MS: '300000',
        QL_CONSOLE_COOKIE_SECURE: 'always',
      },
      { clock },
    );
  });
  afterAll(async () => {
    await t?.close();
    await db?.dispose();
    pki?.remove();
  });

  it('behind a TLS proxy (always) the cookie is Secure', async () => {
    const res = await t.admin('POST', '/api/v1/session', { apiKey: t.viewerToken }, null);
    expect(cookieOf(res).split('; ')).toContain('Secure');
  });

  it('a session idle for its limit is refused; one in use lives until its lifetime', async () => {
    const sign = async () => {
      const res = await t.admin('POST', '/api/v1/session', { apiKey: t.viewerToken }, null);
      return tokenOf(cookieOf(res));
    };
    const get = (token: string) =>
      t.admin('GET', '/api/v1/workers', undefined, null, { headers: { cookie: `ql_session=${token}` } });
    const idle = await sign();
    const busy = await sign();
    for (let step = 1; step <= 5; step++) {
      clock.advance(59_000);
      expect((await get(busy)).status).toBe(200);
    }
    expect((await get(idle)).status).toBe(401); // idle since sign-in, 295 s
    clock.advance(300_000 - 5 * 59_000 - 1);
    expect((await get(busy)).status).toBe(200);
    clock.advance(1);
    expect((await get(busy)).status).toBe(401); // its lifetime, in use or not
  });
});
