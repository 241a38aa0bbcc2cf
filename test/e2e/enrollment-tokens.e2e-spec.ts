// the admin API of enrollment tokens (ADR 0045 §1) on both dialects: create, list, revoke, roles,
// every refused body leaving the database as it was, consume through the service, and no token in the
// control plane's log, in process and from a real control-plane process at debug level.
import { createHash } from 'node:crypto';
import { existsSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { EnrollmentRefusedError } from '@ql/domain';
import { loadConfig } from '../../apps/control-plane/src/config/config';
import { EnrollmentTokensService } from '../../apps/control-plane/src/enrollment/enrollment-tokens.service';
import { ensureDevPki } from '../../apps/control-plane/src/pki';
import { snapshotDatabase } from '../support/db-snapshot';
import { CLI, CONTROL_PLANE, EntryPoint, runCli, tempDir } from '../support/entry-points';
import {
  Dialect,
  TestDatabase,
  TestPlane,
  createTestDatabase,
  createTestPki,
  startTestPlane,
} from '../support/test-plane';
import { CapturedLog } from '../support/captured-log';

const PATH = '/api/v1/enrollment-tokens';
const digestOf = (token: string) => createHash('sha256').update(token).digest('hex');

interface TokenView {
  id: string;
  token?: string;
  status: string;
  uses: number;
}

describe.each<Dialect>(['sqlite', 'postgres'])('enrollment tokens, admin API (%s)', (dialect) => {
  let db: TestDatabase;
  let pki: Awaited<ReturnType<typeof createTestPki>>;
  let t: TestPlane;
  const log = new CapturedLog();
  const tokens: string[] = [];

  beforeAll(async () => {
    db = await createTestDatabase(dialect);
    pki = await createTestPki([]);
    t = await startTestPlane(db, pki, { QL_LOG_LEVEL: 'debug' }, { logger: log });
  });
  afterAll(async () => {
    await t?.close();
    await db?.dispose();
    pki?.remove();
  });

  const create = async (body: unknown) => {
    const res = await t.admin('POST', PATH, body);
    expect(res.status).toBe(201);
    const view = res.body as TokenView & { token: string };
    tokens.push(view.token);
    return view;
  };
  const consume = (workerId: string, token: string) =>
    t.plane.admin.get(EnrollmentTokensService).consume(workerId, token);

  it('create answers the token once; the database and the list hold only metadata', async () => {
    const res = await t.admin('POST', PATH, { workerId: 'router-1' });
    expect(res.status).toBe(201);
    const created = res.body as TokenView & { token: string };
    tokens.push(created.token);
    expect(created).toMatchObject({
      token: expect.stringMatching(/^qlet_[A-Za-z0-9_-]{43}$/),
      workerId: 'router-1',
      pattern: null,
      maxWorkers: 1,
      uses: 0,
      status: 'active',
      revokedAt: null,
      createdBy: expect.any(String),
    });
    expect(Date.parse((res.body as { expiresAt: string }).expiresAt) - Date.now()).toBeGreaterThan(3500_000);
    const stored = JSON.stringify(await snapshotDatabase(t.plane.core.db));
    expect(stored).not.toContain(created.token);
    const list = await t.admin('GET', PATH, undefined, t.viewerToken);
    expect(list.status).toBe(200);
    expect((list.body as { items: TokenView[] }).items).toEqual([
      expect.objectContaining({ id: created.id, workerId: 'router-1', status: 'active' }),
    ]);
    expect(list.raw).not.toContain(created.token);
    expect(list.raw).not.toContain(digestOf(created.token));
    expect(list.raw).not.toMatch(/"token"|digest/);
  });

  it('a pattern token with a count and a lifetime; uses and status follow consume; pages by id', async () => {
    const made = await create({ pattern: 'edge-*', count: 2, ttlSeconds: 600 });
    expect(made).toMatchObject({ pattern: 'edge-*', workerId: null, maxWorkers: 2 });
    await consume('edge-1', made.token);
    await expect(consume('core-1', made.token)).rejects.toEqual(
      new EnrollmentRefusedError('enrollment_token_wrong_worker'),
    );
    await consume('edge-2', made.token);
    await expect(consume('edge-3', made.token)).rejects.toMatchObject({ code: 'enrollment_token_exhausted' });
    const first = await t.admin('GET', `${PATH}?limit=1`, undefined, t.viewerToken);
    const page1 = first.body as { items: TokenView[]; nextAfter: string };
    expect(page1.items).toHaveLength(1);
    const second = await t.admin('GET', `${PATH}?limit=1&after=${page1.nextAfter}`, undefined, t.viewerToken);
    expect((second.body as { items: TokenView[] }).items).toEqual([
      expect.objectContaining({ id: made.id, uses: 2, status: 'exhausted' }),
    ]);
    const audit = await t.admin('GET', '/api/v1/audit?limit=10');
    const actions = (audit.body as { items: { action: string; target: string }[] }).items.map(
      (e) => e.action,
    );
    // Refusals are audited by the enrollment route (bounded per address), not by consume.
    expect(actions.slice(0, 3)).toEqual([
      'enrollment_token.use',
      'enrollment_token.use',
      'enrollment_token.create',
    ]);
    expect(audit.raw).not.toContain(made.token);
    expect(audit.raw).not.toContain(digestOf(made.token));
  });

  it('revoke: the token enrolls nobody from then on; again answers the first revocation; unknown is 404', async () => {
    const made = await create({ workerId: 'router-2' });
    const revoked = await t.admin('DELETE', `${PATH}/${made.id}`);
    expect(revoked.status).toBe(200);
    expect(revoked.body).toMatchObject({ id: made.id, status: 'revoked', revokedAt: expect.any(String) });
    expect((await t.admin('DELETE', `${PATH}/${made.id}`)).body).toEqual(revoked.body);
    await expect(consume('router-2', made.token)).rejects.toMatchObject({
      code: 'enrollment_token_invalid',
      tokenId: made.id,
    });
    const before = await snapshotDatabase(t.plane.core.db);
    const unknown = await t.admin('DELETE', `${PATH}/${t.plane.core.ids.uuidV7()}`);
    expect(unknown).toMatchObject({ status: 404, body: { code: 'not_found' } });
    const bad = await t.admin('DELETE', `${PATH}/${made.token}`);
    expect(bad).toMatchObject({ status: 400, body: { code: 'invalid_request', detail: 'id: invalid_id' } });
    expect(await snapshotDatabase(t.plane.core.db)).toEqual(before);
  });

  it('a viewer lists but cannot create or revoke (403), and nothing changes', async () => {
    const made = await create({ workerId: 'router-3' });
    const before = await snapshotDatabase(t.plane.core.db);
    const post = await t.admin('POST', PATH, { workerId: 'router-4' }, t.viewerToken);
    const del = await t.admin('DELETE', `${PATH}/${made.id}`, undefined, t.viewerToken);
    for (const res of [post, del]) expect(res).toMatchObject({ status: 403, body: { code: 'forbidden' } });
    expect((await t.admin('GET', PATH, undefined, null)).status).toBe(401);
    expect(await snapshotDatabase(t.plane.core.db)).toEqual(before);
  });

  it.each<[string, unknown, string]>([
    ['neither workerId nor pattern', {}, 'workerId: exactly_one_of_workerId_or_pattern'],
    ['both', { workerId: 'a', pattern: 'a-*', count: 2 }, 'workerId: exactly_one_of_workerId_or_pattern'],
    ['an unknown field', { workerId: 'a', token: 'qlet_x' }, 'token: unknown_field'],
    ['a count with a worker id', { workerId: 'a', count: 2 }, 'count: only_with_pattern'],
    ['a pattern without a count', { pattern: 'a-*' }, 'count: required_with_pattern'],
    ['a bare star', { pattern: '*', count: 5 }, 'pattern: invalid_format'],
    ['two stars', { pattern: 'a-*-*', count: 5 }, 'pattern: invalid_format'],
    ['a regex', { pattern: 'a-.*', count: 5 }, 'pattern: invalid_format'],
    ['an upper-case worker id', { workerId: 'Router-1' }, 'workerId: invalid_format'],
    ['a long worker id', { workerId: 'a'.repeat(64) }, 'workerId: too_long'],
    ['a count over 1000', { pattern: 'a-*', count: 1001 }, 'count: out_of_range (allowed 1..1000)'],
    ['a count as a string', { pattern: 'a-*', count: '5' }, 'count: must_be_integer'],
    [
      'a lifetime over 7 d',
      { workerId: 'a', ttlSeconds: 604801 },
      'ttlSeconds: out_of_range (allowed 60..604800)',
    ],
    [
      'a lifetime under a minute',
      { workerId: 'a', ttlSeconds: 59 },
      'ttlSeconds: out_of_range (allowed 60..604800)',
    ],
    ['null', { workerId: null }, 'workerId: must_be_string'],
  ])('%s is 400 naming the field, and the database is unchanged', async (_what, body, detail) => {
    const before = await snapshotDatabase(t.plane.core.db);
    const res = await t.admin('POST', PATH, body);
    expect(res).toMatchObject({ status: 400, body: { code: 'invalid_request', detail } });
    const after = await snapshotDatabase(t.plane.core.db);
    expect(Object.keys(after).filter((k) => !isDeepStrictEqual(after[k], before[k]))).toEqual([]);
  });

  it('list refuses a malformed cursor or limit', async () => {
    for (const query of ['after=router-1', 'limit=0', 'colour=red'])
      expect((await t.admin('GET', `${PATH}?${query}`)).status).toBe(400);
  });

  it('no token made in this file, nor its digest, is in anything the control plane logged', () => {
    expect(tokens.length).toBeGreaterThan(3);
    const text = log.lines.join('\n');
    expect(text).toContain('enrollment token created');
    expect(text).toContain('enrollment refused');
    for (const token of tokens) {
      expect(text).not.toContain(token);
      expect(text).not.toContain(digestOf(token));
    }
  });
});

describe('a real control-plane process at debug level never logs a token (ADR 0045 §1)', () => {
  let dir: string;
  let plane: EntryPoint;
  let apiKey: string;

  beforeAll(async () => {
    dir = tempDir('ql-enroll-log-');
    const pkiDir = join(dir, 'pki');
    await ensureDevPki(pkiDir, { trustDomain: loadConfig({}).trustDomain, workers: [] });
    const env = { QL_DATABASE_URL: `sqlite:${join(dir, 'ql.sqlite')}`, QL_DEV_PKI_DIR: pkiDir };
    plane = new EntryPoint(CONTROL_PLANE, {
      ...env,
      QL_ADMIN_PORT: '0',
      QL_INGRESS_PORT: '0',
      QL_LOG_LEVEL: 'debug',
    });
    await plane.until(
      'control plane ready',
      async () => plane.lines.find((l) => l.msg === 'control plane ready'),
      {
        deadlineMs: 60_000,
      },
    );
    const cli = new EntryPoint(CLI, env, ['api-key', '--name', 'log-test', '--role', 'admin']);
    expect((await cli.exited).code).toBe(0);
    apiKey = /qlk_[A-Za-z0-9_-]{43}/.exec(cli.messages().join('\n'))![0];
  });
  afterAll(async () => {
    if (plane?.running) {
      plane.kill('SIGTERM');
      await plane.exited;
    }
    rmSync(dir, { recursive: true, force: true });
  });

  it('create, list, revoke and refused requests carrying the token leave it out of stdout and stderr', async () => {
    const admin = String(plane.lines.find((l) => l.msg === 'control plane ready')!.admin);
    const call = async (method: string, path: string, body?: unknown) => {
      const res = await fetch(`${admin}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${apiKey}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      return { status: res.status, body: (await res.json()) as Record<string, string> };
    };
    const made = await call('POST', PATH, { workerId: 'router-9' });
    expect(made.status).toBe(201);
    const token = made.body.token!;
    expect((await call('GET', PATH)).status).toBe(200);
    expect((await call('POST', PATH, { workerId: 'router-9', token })).status).toBe(400);
    expect((await call('DELETE', `${PATH}/${token}`)).status).toBe(400);
    expect((await call('POST', PATH, { pattern: token, count: 1 })).status).toBe(400);
    expect((await call('DELETE', `${PATH}/${made.body.id}`)).status).toBe(200);
    await plane.until('the revocation logged', async () =>
      plane.lines.find((l) => l.msg === 'enrollment token revoked'),
    );
    const output = plane.transcript();
    expect(output).toContain(made.body.id);
    expect(output).not.toContain(token);
    expect(output).not.toContain(digestOf(token));
  });
});

describe('npm run enroll-token (the CLI)', () => {
  /**
   * Each test runs the CLI as a new node process several times (sources through SWC: seconds each
   * on a loaded machine); one took over a minute beside the Compose replay's build.
   */
  const CLI_TEST_MS = 240_000;
  let dir: string;
  let env: Record<string, string>;
  const cli = (...args: string[]) => runCli(env, ...args);

  beforeAll(async () => {
    dir = tempDir('ql-enroll-cli-');
    env = { QL_DATABASE_URL: `sqlite:${join(dir, 'ql.sqlite')}` };
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it(
    'refuses a database that does not exist (exit 2) and creates none',
    async () => {
      const answer = await cli('enroll-token', 'create', '--worker', 'router-1');
      expect(answer).toMatchObject({ code: 2, stdout: '' });
      expect(answer.stderr).toContain(`enroll-token: no database at ${join(dir, 'ql.sqlite')}`);
      expect(existsSync(join(dir, 'ql.sqlite'))).toBe(false);
    },
    CLI_TEST_MS,
  );

  it(
    'create prints the token once; list shows it without the token; revoke; bad arguments exit 2 before any write',
    async () => {
      expect((await cli('migrate')).code).toBe(0);
      const made = await cli(
        'enroll-token',
        'create',
        '--pattern',
        'router-*',
        '--count',
        '50',
        '--ttl',
        '2h',
      );
      expect(made.code).toBe(0);
      const created = JSON.parse(made.stdout) as {
        id: string;
        token: string;
        maxWorkers: number;
        createdBy: string;
      };
      expect(created).toMatchObject({
        maxWorkers: 50,
        createdBy: 'cli',
        token: expect.stringMatching(/^qlet_/),
      });
      expect(made.stderr).toContain('Store the token now: it is not shown again.');
      expect(created).toMatchObject({ mayReplace: false });
      // --may-replace (issue 27 item 10): a pattern token that may enroll a live id; not with --worker.
      const replacing = await cli(
        'enroll-token',
        'create',
        '--pattern',
        'pool-*',
        '--count',
        '1',
        '--may-replace',
      );
      expect(replacing.code).toBe(0);
      expect(JSON.parse(replacing.stdout)).toMatchObject({ pattern: 'pool-*', mayReplace: true });
      const listed = await cli('enroll-token', 'list');
      expect(listed.code).toBe(0);
      expect(JSON.parse(listed.stdout)).toMatchObject({
        items: [{ id: created.id, status: 'active' }, { mayReplace: true }],
      });
      expect(listed.stdout + listed.stderr).not.toContain(created.token);
      for (const args of [
        ['create', '--pattern', 'router-*', '--count', '5x'],
        ['create', '--worker', 'router-1', '--ttl', '8d'],
        ['create', '--worker', 'router-1', '--colour', 'red'],
        ['create', '--pattern', '*', '--count', '5'],
        ['create', '--worker', 'router-1', '--may-replace'],
        ['frobnicate'],
      ]) {
        const refused = await cli('enroll-token', ...args);
        expect({ args, code: refused.code, stdout: refused.stdout }).toEqual({ args, code: 2, stdout: '' });
      }
      const revoked = await cli('enroll-token', 'revoke', created.id);
      expect(revoked.code).toBe(0);
      expect(JSON.parse(revoked.stdout)).toMatchObject({ id: created.id, status: 'revoked' });
      const again = JSON.parse((await cli('enroll-token', 'list')).stdout) as { items: unknown[] };
      expect(again.items).toEqual([
        expect.objectContaining({ id: created.id, status: 'revoked' }),
        expect.objectContaining({ mayReplace: true, status: 'active' }),
      ]);
    },
    CLI_TEST_MS,
  );
});
