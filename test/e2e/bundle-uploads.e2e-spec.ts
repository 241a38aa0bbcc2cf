// Issue 27 item 6 (ADR 0051), on the real admin listener and both dialects: a bundle upload's key and
// role are checked before its body is read — an unauthenticated or viewer upload, and a gzip body
// sent to another route, are answered while the client has sent a sliver of what it announced — and
// at most QL_BUNDLE_UPLOADS_MAX upload bodies are received at once.
import { snapshotDatabase } from '../support/db-snapshot';
import { bundleOf } from '../support/bundle-fixtures';
import { RawConnection, RawResponse } from '../support/raw-http';
import { eventually, within } from '../support/remote-run-harness';
import {
  Dialect,
  TestDatabase,
  TestPlane,
  createTestDatabase,
  createTestPki,
  startTestPlane,
} from '../support/test-plane';

const MAX_BYTES = 1024 * 1024;
/** What a refused client has sent when it reads its answer: a sliver of the body it announced. */
const SENT_BYTES = 4 * 1024;
/** Only bounds a hang: a server that waits for the rest of the body never answers. */
const ANSWER_DEADLINE_MS = 15_000;
const SHUTDOWN_GRACE_MS = 1_000;

describe.each<Dialect>(['sqlite', 'postgres'])('bundle uploads at the admin edge (%s)', (dialect) => {
  let db: TestDatabase;
  let pki: Awaited<ReturnType<typeof createTestPki>>;
  let t: TestPlane;

  /** Opens an upload announcing `length` bytes and sends the first `sent` of `body`. */
  const startUpload = async (
    options: {
      token?: string;
      method?: string;
      path?: string;
      length?: number;
      body?: Buffer;
      sent?: number;
    } = {},
  ) => {
    const {
      token,
      method = 'POST',
      path = '/api/v1/bundles',
      length = MAX_BYTES,
      sent = SENT_BYTES,
    } = options;
    const body = options.body ?? Buffer.alloc(length, 0x1f);
    const c = await RawConnection.open(t.plane.adminUrl);
    await c.write(
      `${method} ${path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/gzip\r\n` +
        `Content-Length: ${body.length}\r\n${token ? `Authorization: Bearer ${token}\r\n` : ''}\r\n`,
    );
    await c.write(body.subarray(0, sent));
    return { c, rest: () => c.write(body.subarray(sent)) };
  };
  const answer = (c: RawConnection, what: string): Promise<RawResponse> =>
    within(`${what}: an answer before the rest of the body`, ANSWER_DEADLINE_MS, c.response());

  beforeAll(async () => {
    db = await createTestDatabase(dialect);
    pki = await createTestPki([]);
    t = await startTestPlane(db, pki, {
      QL_BUNDLE_MAX_BYTES: String(MAX_BYTES),
      QL_BUNDLE_UPLOADS_MAX: '2',
      QL_SHUTDOWN_GRACE_MS: String(SHUTDOWN_GRACE_MS),
    });
  });
  let closed = false;
  afterAll(async () => {
    if (!closed) await t?.close();
    await db?.dispose();
    pki?.remove();
  });

  it.each([
    ['no key', undefined, 401, 'authentication_required'],
    ['a viewer key', 'viewer', 403, 'forbidden'],
    ['an unknown key', 'qlk_' + 'x'.repeat(43), 401, 'authentication_required'],
  ])(
    'an upload with %s is refused before its body is read: answered with 4 KiB of 1 MiB sent, nothing stored',
    async (_what, key, status, code) => {
      const before = await snapshotDatabase(t.plane.core.db);
      const token = key === 'viewer' ? t.viewerToken : key;
      const { c } = await startUpload({ token });
      const res = await answer(c, `upload with ${_what}`);
      expect({ status: res.status, code: (res.body as { code: string }).code }).toEqual({ status, code });
      expect(res.headers.connection).toBe('close');
      await c.closed();
      expect(await snapshotDatabase(t.plane.core.db)).toEqual(before);
    },
  );

  it('a gzip body sent to another route is 415 unread, whoever sends it', async () => {
    for (const [method, path] of [
      ['POST', '/api/v1/tasks'],
      ['POST', `/api/v1/bundles/${'a'.repeat(64)}`],
      ['PUT', '/api/v1/bundles'],
    ]) {
      const { c } = await startUpload({ token: t.adminToken, method, path });
      const res = await answer(c, `gzip to ${method} ${path}`);
      expect({ path, status: res.status, code: (res.body as { code: string }).code }).toEqual({
        path,
        status: 415,
        code: 'unsupported_media_type',
      });
      c.destroy();
    }
  });

  /** `ql_bundle_uploads_receiving` as /metrics says it now. */
  const receiving = async (): Promise<number> => {
    const res = await t.admin('GET', '/metrics', undefined, t.viewerToken);
    return Number(/^ql_bundle_uploads_receiving (\d+)$/m.exec(res.raw)?.[1]);
  };
  const receivingBecomes = (n: number) =>
    eventually(`${n} upload bodies being received`, async () => ((await receiving()) === n ? n : undefined));

  it('at most QL_BUNDLE_UPLOADS_MAX bodies are received at once: the next is 503 bundle_uploads_busy with Retry-After, until one ends', async () => {
    const b = bundleOf({ '签到.js': 'console.log("签到")\n' });
    // Opened one after another, each seen holding its slot: a later upload never takes a slot first.
    const first = await startUpload({ token: t.adminToken, body: b.content, sent: 10 });
    await receivingBecomes(1);
    const second = await startUpload({ token: t.adminToken, body: b.content, sent: 10 });
    await receivingBecomes(2);
    const third = await startUpload({ token: t.adminToken, body: b.content, sent: b.content.length });
    const busy = await answer(third.c, 'a third upload');
    third.c.destroy();
    expect({ status: busy.status, body: busy.body }).toMatchObject({
      status: 503,
      body: { code: 'unavailable', reason: 'bundle_uploads_busy' },
    });
    expect(busy.headers['retry-after']).toBe('1');
    expect(await receiving()).toBe(2);
    await first.rest();
    expect((await answer(first.c, 'the first upload')).status).toBe(200);
    second.c.destroy(); // a client gone mid-body frees its slot too
    await receivingBecomes(0);
    for (const n of [1, 2]) {
      const { c } = await startUpload({ token: t.adminToken, body: b.content, sent: b.content.length });
      const res = await answer(c, `upload ${n} after the slots freed`);
      c.destroy();
      expect({ status: res.status, body: res.body }).toMatchObject({
        status: 200,
        body: { digest: b.digest, created: false },
      });
    }
  });

  // Last: it closes the plane.
  it('closing the plane cuts off an upload stalled mid-body after QL_SHUTDOWN_GRACE_MS: the close ends, the client is cut off', async () => {
    const stalled = await startUpload({ token: t.adminToken });
    await receivingBecomes(1);
    closed = true;
    await within('the plane closed with an upload stalled mid-body', ANSWER_DEADLINE_MS, t.close());
    await within('the stalled upload cut off', ANSWER_DEADLINE_MS, stalled.c.closed());
  });
});
