import { readFileSync } from 'node:fs';
import type { Server } from 'node:http';
import { INGRESS_PREFIX, ingressPath } from '@ql/contracts';
import { DevPkiPaths, PemPair } from '../../apps/control-plane/src/pki';
import { snapshotDatabase } from '../support/db-snapshot';
import { newSessionId, registerBody, validCapabilities } from '../support/fixtures';
import { RawConnection } from '../support/raw-http';
import {
  Dialect,
  HttpResult,
  TestDatabase,
  TestPlane,
  createTestDatabase,
  createTestPki,
  readPair,
  startTestPlane,
} from '../support/test-plane';

const KiB = 1024;
/** Not UTF-8: a lone continuation lead, a BOM half, a lead byte followed by ASCII. */
const BAD_UTF8 = Buffer.from([0xff, 0xfe, 0xc3, 0x28]);
const BOM = Buffer.from([0xef, 0xbb, 0xbf]);

/** The JSON of `body` with BAD_UTF8 where its strings held `@@`. */
const withBadBytes = (body: unknown): Buffer => {
  const parts = JSON.stringify(body).split('@@');
  return Buffer.concat(parts.flatMap((part, i) => (i ? [BAD_UTF8, Buffer.from(part)] : [Buffer.from(part)])));
};
/** The JSON of `body` with `member` written once more, with another value, before its own. */
const withDuplicate = (body: unknown, member: string, earlier: string): string =>
  JSON.stringify(body).replace(member, `${member.slice(0, member.indexOf(':') + 1)}${earlier},${member}`);

describe.each<Dialect>(['sqlite', 'postgres'])('strict JSON request bodies (%s)', (dialect) => {
  let db: TestDatabase;
  let pki: DevPkiPaths & { remove(): void; caPair(): PemPair };
  let t: TestPlane;
  let workerA: PemPair;
  let workerB: PemPair;
  let heartbeatPath: string;

  beforeAll(async () => {
    db = await createTestDatabase(dialect);
    pki = await createTestPki(['worker-a', 'worker-b']);
    t = await startTestPlane(db, pki, { QL_INGRESS_RATE_BURST: '100000' });
    workerA = readPair(pki.workers['worker-a']!);
    workerB = readPair(pki.workers['worker-b']!);
    const session = newSessionId();
    heartbeatPath = ingressPath('worker-b', session, 'heartbeat');
    const registered = await t.ingress(workerB, ingressPath('worker-b', session, 'register'), registerBody());
    expect(registered.status).toBe(200);
  });
  afterAll(async () => {
    await t?.close();
    await db?.dispose();
    pki?.remove();
  });

  /** Every row a refused body could have written: the usual tables, tasks and their revisions. */
  const rows = async () => ({
    ...(await snapshotDatabase(t.plane.core.db)),
    tasks: await t.plane.core.db.many('SELECT * FROM tasks ORDER BY id'),
    revisions: await t.plane.core.db.many('SELECT * FROM task_revisions ORDER BY task_id, revision'),
  });

  const expectRefused = async (send: () => Promise<HttpResult>, code: string, field: string) => {
    const before = await rows();
    const res = await send();
    expect(res.status).toBe(400);
    const said = (res.body as { message?: string; detail?: string }) ?? {};
    expect(res.body).toMatchObject({ code });
    expect(said.message ?? said.detail).toContain(field);
    expect(await rows()).toEqual(before);
  };

  const register = () => ingressPath('worker-a', newSessionId(), 'register');
  const gpu = { vendor: 'nvidia', model: 'A100@@', memoryMiB: 40960, features: [] };

  it.each<[string, () => string | Buffer, string]>([
    [
      'maxConcurrentRuns twice',
      () => withDuplicate(registerBody(), '"maxConcurrentRuns":4', '1'),
      'maxConcurrentRuns',
    ],
    [
      'a label twice',
      () => withDuplicate(registerBody(), '"zone":"lab"', '"elsewhere"'),
      'capabilities.labels.zone',
    ],
    [
      'a label value that is not UTF-8',
      () => withBadBytes(registerBody({ capabilities: validCapabilities({ labels: { zone: 'lab@@' } }) })),
      'invalid_utf8',
    ],
    [
      'a GPU model that is not UTF-8',
      () => withBadBytes(registerBody({ capabilities: validCapabilities({ gpus: [gpu] }) })),
      'invalid_utf8',
    ],
    [
      'a label value with an escaped lone surrogate',
      () =>
        JSON.stringify(registerBody({ capabilities: validCapabilities({ labels: { zone: 'l\ud800' } }) })),
      'capabilities.labels.zone',
    ],
    [
      'a byte-order mark',
      () => Buffer.concat([BOM, Buffer.from(JSON.stringify(registerBody()))]),
      'byte_order_mark',
    ],
  ])('ingress: a register body with %s is 400 and registers nothing', async (_name, body, field) => {
    await expectRefused(
      () => t.ingress(workerA, register(), undefined, { rawBody: body() }),
      'invalid_worker_request',
      field,
    );
  });

  it('ingress: a heartbeat with availableSlots twice is 400 and changes nothing', async () => {
    const body = withDuplicate(
      { generation: 1, expectedVersion: 0, availableSlots: 2 },
      '"availableSlots":2',
      '3',
    );
    await expectRefused(
      () => t.ingress(workerB, heartbeatPath, undefined, { rawBody: body }),
      'invalid_worker_request',
      'availableSlots',
    );
  });

  it.each<[string, string, () => string | Buffer, string]>([
    [
      'an API key with role viewer then admin',
      '/api/v1/api-keys',
      () => '{"name":"sneaky","role":"viewer","role":"admin"}',
      'role',
    ],
    [
      'a task whose env names a variable twice',
      '/api/v1/tasks',
      () => '{"name":"dup env","command":"env","runtime":"shell","env":{"A":"1","A":"2"}}',
      'env.A',
    ],
    [
      'a task command that is not UTF-8',
      '/api/v1/tasks',
      () => withBadBytes({ name: 'bad bytes', command: 'echo @@', runtime: 'shell' }),
      'invalid_utf8',
    ],
    [
      'a task command with an escaped lone surrogate',
      '/api/v1/tasks',
      () => JSON.stringify({ name: 'lone surrogate', command: 'echo \udc00', runtime: 'shell' }),
      'command',
    ],
    [
      'a byte-order mark',
      '/api/v1/api-keys',
      () => Buffer.concat([BOM, Buffer.from('{"name":"bom","role":"viewer"}')]),
      'byte_order_mark',
    ],
  ])('admin: %s is 400 problem+json and writes nothing', async (_name, path, body, field) => {
    await expectRefused(
      () => t.admin('POST', path, undefined, t.adminToken, { rawBody: body() }),
      'invalid_request',
      field,
    );
  });

  it('admin: a form-encoded body is 400 problem+json and writes nothing (JSON only)', async () => {
    const headers = { 'content-type': 'application/x-www-form-urlencoded' };
    await expectRefused(
      () =>
        t.admin('POST', '/api/v1/api-keys', undefined, t.adminToken, {
          rawBody: 'name=form&role=viewer',
          headers,
        }),
      'invalid_request',
      'JSON',
    );
  });
});

describe('framework answers and closes of both listeners', () => {
  let db: TestDatabase;
  let pki: DevPkiPaths & { remove(): void; caPair(): PemPair };
  let t: TestPlane;
  let ca: Buffer;
  let workerA: PemPair;

  beforeAll(async () => {
    db = await createTestDatabase('sqlite');
    pki = await createTestPki(['worker-a']);
    t = await startTestPlane(db, pki, { QL_INGRESS_RATE_BURST: '100000' });
    ca = readFileSync(pki.caCertPath);
    workerA = readPair(pki.workers['worker-a']!);
  });
  afterAll(async () => {
    await t?.close();
    await db?.dispose();
    pki?.remove();
  });

  const listener = (name: 'admin' | 'ingress') =>
    name === 'admin'
      ? {
          open: () => RawConnection.open(t.plane.adminUrl),
          server: t.plane.admin.getHttpServer() as Server,
          post: '/api/v1/tasks',
          route: (segment: string) => `/api/v1/tasks/${segment}`,
          next: { head: 'GET /livez HTTP/1.1\r\nHost: localhost\r\n\r\n', status: 200 },
          type: 'application/problem+json',
          codes: {
            invalid: 'invalid_request',
            noRoute: 'route_not_found',
            tooLarge: 'request_too_large',
          },
          status: { invalid: 400, tooLarge: 431 },
        }
      : {
          open: () => RawConnection.open(t.plane.ingressUrl, { ca, credentials: workerA }),
          server: t.plane.ingress.getHttpServer() as Server,
          post: ingressPath('worker-a', newSessionId(), 'register'),
          route: (segment: string) => `${INGRESS_PREFIX}/worker-a/sessions/${segment}/register`,
          next: { head: 'GET / HTTP/1.1\r\nHost: localhost\r\n\r\n', status: 404 },
          type: 'application/json',
          codes: {
            invalid: 'invalid_worker_request',
            noRoute: 'worker_route_not_found',
            tooLarge: 'worker_request_too_large',
          },
          // Of a head Node cannot parse; the ingress answers only statuses of its error table.
          status: { invalid: 400, tooLarge: 413 },
        };

  const head = (method: string, path: string, extra: string[] = []) =>
    Buffer.from(
      [
        `${method} ${path} HTTP/1.1`,
        'Host: localhost',
        `Authorization: Bearer ${t.adminToken}`,
        ...extra,
        '',
        '',
      ].join('\r\n'),
      'latin1',
    );

  /** Resolves when the listener has written the whole answer to the next request it receives. */
  const answered = (server: Server) =>
    new Promise<void>((resolve) =>
      server.once('request', (_req, res) => res.once('finish', () => resolve())),
    );

  describe.each(['admin', 'ingress'] as const)('%s', (name) => {
    it.each(['Content-Length', 'chunked'])(
      'a body over the limit (%s) gets a complete 413 with Connection: close while the client still sends',
      async (framing) => {
        const l = listener(name);
        const total = 256 * KiB;
        const chunk = Buffer.alloc(KiB, 0x20);
        const frame = (b: Buffer) =>
          framing === 'chunked' ? Buffer.concat([Buffer.from(`400\r\n`), b, Buffer.from('\r\n')]) : b;
        const conn = await l.open();
        try {
          // A client that sends its whole body before it reads, as most blocking clients do.
          conn.pauseReading();
          const answer = answered(l.server);
          await conn.write(
            head('POST', l.post, [
              'Content-Type: application/json',
              framing === 'chunked' ? 'Transfer-Encoding: chunked' : `Content-Length: ${total}`,
            ]),
          );
          let sent = 0;
          // Past every body limit (ingress 64 KiB, admin 128 KiB): the server answers before the end.
          for (; sent < 140 * KiB; sent += KiB) await conn.write(frame(chunk));
          await answer;
          for (; sent < total; sent += KiB) {
            await conn.write(frame(chunk));
            // One turn of the event loop per chunk, so a reset of the server would reach this client.
            await new Promise(setImmediate);
          }
          if (framing === 'chunked') await conn.write('0\r\n\r\n');
          conn.resumeReading();
          const res = await conn.response();
          expect(res.status).toBe(413);
          expect(res.headers['connection']).toBe('close');
          expect(res.headers['content-type']).toContain(l.type);
          expect(res.body).toMatchObject({ code: l.codes.tooLarge });
          await conn.closed();
        } finally {
          conn.destroy();
        }
      },
    );

    it.each([
      ['a malformed percent-encoding (%ff)', 400, '%ff', 'invalid'],
      ['an overlong UTF-8 percent-encoding (%C0%80)', 400, '%C0%80', 'invalid'],
      ['a lone percent sign', 400, '%', 'invalid'],
      ['a segment over 100 characters', 404, 'a'.repeat(101), 'noRoute'],
    ] as const)(
      '%s in a path segment is %i in the documented shape; the connection stays usable',
      async (_n, status, segment, code) => {
        const l = listener(name);
        const conn = await l.open();
        try {
          await conn.write(head(name === 'admin' ? 'GET' : 'POST', l.route(segment), ['Content-Length: 0']));
          const res = await conn.response();
          expect(res.status).toBe(status);
          expect(res.headers['content-type']).toContain(l.type);
          expect(res.body).toMatchObject({ code: l.codes[code] });
          await conn.write(l.next.head);
          expect((await conn.response()).status).toBe(l.next.status);
        } finally {
          conn.destroy();
        }
      },
    );

    it.each([
      ['a raw byte 0x80 in the URL', 'invalid', () => head('GET', listener(name).route('id\x80'))],
      ['a raw byte 0xFF in the URL', 'invalid', () => head('GET', listener(name).route('id\xff'))],
      ['a request head over 16 KiB', 'tooLarge', () => head('GET', '/', [`X-Pad: ${'x'.repeat(17 * KiB)}`])],
    ] as const)(
      '%s: Node cannot parse it, the answer is in the documented shape and says Connection: close',
      async (_n, code, request) => {
        const l = listener(name);
        const conn = await l.open();
        try {
          await conn.write(request());
          const res = await conn.response();
          expect(res.status).toBe(l.status[code]);
          expect(res.headers['content-type']).toContain(l.type);
          expect(res.headers['connection']).toBe('close');
          expect(res.body).toMatchObject({ code: l.codes[code] });
          await conn.closed();
        } finally {
          conn.destroy();
        }
      },
    );
  });

  it.each(['GET', 'PUT', 'DELETE', 'PATCH', 'OPTIONS'])(
    'ingress: %s on an ingress path is 404 worker_route_not_found, whatever the body',
    async (method) => {
      for (const rawBody of ['{"generation":', JSON.stringify({ pad: 'x'.repeat(5 * KiB) })]) {
        const res = await t.ingress(
          workerA,
          ingressPath('worker-a', newSessionId(), 'heartbeat'),
          undefined,
          {
            method,
            rawBody,
          },
        );
        expect(res.status).toBe(404);
        expect(res.body).toEqual({ code: 'worker_route_not_found', message: expect.any(String) });
      }
    },
  );
});
