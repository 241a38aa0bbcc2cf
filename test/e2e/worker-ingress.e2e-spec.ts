import { Agent, request } from 'node:https';
import { readFileSync } from 'node:fs';
import type { TLSSocket } from 'node:tls';
import { ingressPath } from '@ql/contracts';
import { DevPkiPaths, PemPair } from '../../apps/control-plane/src/pki';
import { snapshotDatabase } from '../support/db-snapshot';
import { newSessionId, registerBody, validCapabilities } from '../support/fixtures';
import {
  Dialect,
  TRUST_DOMAIN,
  TestDatabase,
  TestPlane,
  createTestDatabase,
  createTestPki,
  createWorkerCert,
  readPair,
  startTestPlane,
} from '../support/test-plane';

describe.each<Dialect>(['sqlite', 'postgres'])('worker ingress over mTLS (%s)', (dialect) => {
  let db: TestDatabase;
  let pki: DevPkiPaths & { remove(): void; caPair(): PemPair };
  let t: TestPlane;
  let workerA: PemPair;
  let workerB: PemPair;

  beforeAll(async () => {
    db = await createTestDatabase(dialect);
    pki = await createTestPki(['worker-a', 'worker-b', 'worker-c', 'worker-d']);
    t = await startTestPlane(db, pki, { QL_INGRESS_RATE_BURST: '100000' });
    workerA = readPair(pki.workers['worker-a']!);
    workerB = readPair(pki.workers['worker-b']!);
  });
  afterAll(async () => {
    await t?.close();
    await db?.dispose();
    pki?.remove();
  });

  const register = (creds: PemPair, workerId: string, sessionId: string, body: unknown = registerBody()) =>
    t.ingress(creds, ingressPath(workerId, sessionId, 'register'), body);

  it('registers, heartbeats, drains and goes offline with version fencing', async () => {
    const s = newSessionId();
    const reg = await register(workerA, 'worker-a', s);
    expect(reg.status).toBe(200);
    expect(reg.body).toMatchObject({
      outcome: 'created',
      generation: 1,
      version: 0,
      status: 'online',
      availableSlots: 4,
    });
    const hb = await t.ingress(workerA, ingressPath('worker-a', s, 'heartbeat'), {
      generation: 1,
      expectedVersion: 0,
      availableSlots: 2,
    });
    expect(hb.status).toBe(200);
    expect(hb.body).toMatchObject({ version: 1, availableSlots: 2 });
    // The very same call again (its answer was lost): the same answer, applied once (ADR 0012).
    const replay = await t.ingress(workerA, ingressPath('worker-a', s, 'heartbeat'), {
      generation: 1,
      expectedVersion: 0,
      availableSlots: 2,
    });
    expect(replay.status).toBe(200);
    expect(replay.body).toEqual(hb.body);
    const stale = await t.ingress(workerA, ingressPath('worker-a', s, 'heartbeat'), {
      generation: 1,
      expectedVersion: 0,
      availableSlots: 1,
    });
    expect(stale.status).toBe(409);
    expect(stale.body).toEqual({
      code: 'worker_session_fenced',
      message: expect.any(String),
      reason: 'version_mismatch',
    });
    const drain = await t.ingress(workerA, ingressPath('worker-a', s, 'drain'), {
      generation: 1,
      expectedVersion: 1,
    });
    expect(drain.body).toMatchObject({ status: 'draining', availableSlots: 0, version: 2 });
    const off = await t.ingress(workerA, ingressPath('worker-a', s, 'offline'), {
      generation: 1,
      expectedVersion: 2,
    });
    expect(off.body).toMatchObject({ status: 'offline', version: 3 });
    const after = await t.ingress(workerA, ingressPath('worker-a', s, 'heartbeat'), {
      generation: 1,
      expectedVersion: 3,
      availableSlots: 0,
    });
    expect(after.status).toBe(409);
    expect((after.body as { reason: string }).reason).toBe('session_offline');
  });

  it('a new session fences the old one: its heartbeat is 409 session_replaced', async () => {
    const s1 = newSessionId();
    const s2 = newSessionId();
    expect((await register(workerB, 'worker-b', s1)).status).toBe(200);
    const second = await register(workerB, 'worker-b', s2);
    expect(second.body).toMatchObject({ outcome: 'replaced', generation: 2 });
    const old = await t.ingress(workerB, ingressPath('worker-b', s1, 'heartbeat'), {
      generation: 1,
      expectedVersion: 0,
      availableSlots: 1,
    });
    expect(old.status).toBe(409);
    expect((old.body as { reason: string }).reason).toBe('session_replaced');
  });

  it('identifies the worker on a resumed TLS session too (R-ID-2)', async () => {
    // keepAlive off: every request is a new connection, and the agent offers the cached session.
    const agent = new Agent({
      keepAlive: false,
      ca: readFileSync(pki.caCertPath),
      cert: workerA.certPem,
      key: workerA.keyPem,
    });
    const call = (path: string, body: unknown) =>
      new Promise<{ status: number; reused: boolean; body: { generation: number; version: number } }>(
        (resolve, reject) => {
          const payload = JSON.stringify(body);
          const req = request(new URL(path, t.plane.ingressUrl), {
            method: 'POST',
            agent,
            servername: 'localhost',
            headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) },
          });
          req.on('error', reject);
          req.on('response', (res) => {
            const reused = (res.socket as TLSSocket).isSessionReused();
            let text = '';
            res.on('data', (chunk: Buffer) => (text += chunk.toString('utf8')));
            res.on('end', () => resolve({ status: res.statusCode ?? 0, reused, body: JSON.parse(text) }));
          });
          req.end(payload);
        },
      );
    const s = newSessionId();
    const first = await call(ingressPath('worker-a', s, 'register'), registerBody());
    const { generation, version } = first.body;
    const second = await call(ingressPath('worker-a', s, 'heartbeat'), {
      generation,
      expectedVersion: version,
      availableSlots: 1,
    });
    agent.destroy();
    expect(first).toMatchObject({ status: 200, reused: false });
    expect(second).toMatchObject({ status: 200, reused: true, body: { generation, version: version + 1 } });
  });

  it('refuses a connection without a client certificate at the gate (ADR 0045 §2) and fails the handshake on TLS 1.2', async () => {
    const before = t.statements();
    const res = await t.ingress(null, ingressPath('worker-a', newSessionId(), 'register'), registerBody());
    expect(res).toMatchObject({ status: 401, body: { code: 'worker_authentication_required' } });
    expect(t.statements()).toBe(before);
    await expect(
      t.ingress(workerA, ingressPath('worker-a', newSessionId(), 'register'), registerBody(), {
        maxVersion: 'TLSv1.2',
      }),
    ).rejects.toThrow();
  });

  it("worker-a's certificate on worker-b's path is 401 with zero repository calls", async () => {
    const before = t.statements();
    const res = await t.ingress(workerA, ingressPath('worker-b', newSessionId(), 'register'), registerBody());
    expect(res.status).toBe(401);
    expect(res.body).toMatchObject({ code: 'worker_authentication_required' });
    expect(t.statements()).toBe(before);
  });

  it.each<[string, Parameters<typeof createWorkerCert>[1]]>([
    ['a CA certificate used as a leaf', { workerId: 'worker-c', trustDomain: TRUST_DOMAIN, isCa: true }],
    ['another trust domain', { workerId: 'worker-c', trustDomain: 'evil.example' }],
    [
      'two URI SANs',
      {
        workerId: 'worker-c',
        trustDomain: TRUST_DOMAIN,
        uris: [`spiffe://${TRUST_DOMAIN}/worker/worker-c`, `spiffe://${TRUST_DOMAIN}/worker/worker-d`],
      },
    ],
    ['no URI SAN', { workerId: 'worker-c', trustDomain: TRUST_DOMAIN, uris: [] }],
  ])('refuses %s with 401 before any repository call', async (_name, options) => {
    const cert = await createWorkerCert(pki.caPair(), options);
    const before = t.statements();
    const res = await t.ingress(cert, ingressPath('worker-c', newSessionId(), 'register'), registerBody());
    expect(res.status).toBe(401);
    expect(t.statements()).toBe(before);
  });

  it('a certificate without clientAuth is not trusted (OpenSSL checks the purpose): 401 at the gate, no repository', async () => {
    const cert = await createWorkerCert(pki.caPair(), {
      workerId: 'worker-c',
      trustDomain: TRUST_DOMAIN,
      clientAuth: false,
    });
    const before = t.statements();
    const res = await t.ingress(cert, ingressPath('worker-c', newSessionId(), 'register'), registerBody());
    expect(res).toMatchObject({ status: 401, body: { code: 'worker_authentication_required' } });
    expect(t.statements()).toBe(before);
  });

  it('a disabled worker is rejected on every call and cannot register a new session', async () => {
    const s = newSessionId();
    const creds = readPair(pki.workers['worker-c']!);
    expect((await register(creds, 'worker-c', s)).status).toBe(200);
    expect((await t.admin('POST', '/api/v1/workers/worker-c/disable')).status).toBe(200);
    const hb = await t.ingress(creds, ingressPath('worker-c', s, 'heartbeat'), {
      generation: 1,
      expectedVersion: 0,
      availableSlots: 1,
    });
    expect(hb.status).toBe(409);
    expect((hb.body as { reason: string }).reason).toBe('worker_disabled');
    const again = await register(creds, 'worker-c', newSessionId());
    expect(again.status).toBe(409);
    expect((again.body as { reason: string }).reason).toBe('worker_disabled');
  });

  describe('bad input gets a clear error and changes nothing', () => {
    const labels33 = Object.fromEntries(Array.from({ length: 33 }, (_, i) => [`k${i}`, 'v']));
    it.each<[string, () => Parameters<TestPlane['ingress']>, number, string]>([
      [
        'an unknown field',
        () => [
          workerA,
          ingressPath('worker-a', newSessionId(), 'register'),
          { ...registerBody(), workerId: 'worker-a' },
        ],
        400,
        'invalid_worker_request',
      ],
      [
        'an unknown capability field',
        () => [
          workerA,
          ingressPath('worker-a', newSessionId(), 'register'),
          registerBody({ capabilities: { ...validCapabilities(), cpu: 4 } }),
        ],
        400,
        'invalid_worker_request',
      ],
      [
        'an invalid semver',
        () => [
          workerA,
          ingressPath('worker-a', newSessionId(), 'register'),
          registerBody({ softwareVersion: '1.0' }),
        ],
        400,
        'invalid_worker_request',
      ],
      [
        '33 labels',
        () => [
          workerA,
          ingressPath('worker-a', newSessionId(), 'register'),
          registerBody({ capabilities: validCapabilities({ labels: labels33 }) }),
        ],
        400,
        'invalid_worker_request',
      ],
      [
        'an oversized register body',
        () => [
          workerA,
          ingressPath('worker-a', newSessionId(), 'register'),
          undefined,
          { rawBody: JSON.stringify({ ...registerBody(), pad: 'x'.repeat(21 * 1024) }) },
        ],
        413,
        'worker_request_too_large',
      ],
      [
        'a heartbeat over 4 KiB',
        () => [
          workerA,
          ingressPath('worker-a', newSessionId(), 'heartbeat'),
          undefined,
          {
            rawBody: JSON.stringify({
              generation: 1,
              expectedVersion: 0,
              availableSlots: 1,
              pad: 'x'.repeat(4096),
            }),
          },
        ],
        413,
        'worker_request_too_large',
      ],
      [
        'invalid JSON',
        () => [
          workerA,
          ingressPath('worker-a', newSessionId(), 'register'),
          undefined,
          { rawBody: '{"capabilities":' },
        ],
        400,
        'invalid_worker_request',
      ],
      [
        'a session id that is not UUIDv7',
        () => [
          workerA,
          ingressPath('worker-a', '01890a5d-ac96-474b-bcce-b302099a8057', 'register'),
          registerBody(),
        ],
        400,
        'invalid_worker_request',
      ],
      [
        'a query string',
        () => [workerA, `${ingressPath('worker-a', newSessionId(), 'register')}?x=1`, registerBody()],
        404,
        'worker_route_not_found',
      ],
      [
        'an unknown action',
        () => [
          workerA,
          ingressPath('worker-a', newSessionId(), 'register').replace(/register$/, 'explode'),
          registerBody(),
        ],
        404,
        'worker_route_not_found',
      ],
      [
        'a GET',
        () => [workerA, ingressPath('worker-a', newSessionId(), 'register'), undefined, { method: 'GET' }],
        404,
        'worker_route_not_found',
      ],
      [
        'a non-JSON content type',
        () => [
          workerA,
          ingressPath('worker-a', newSessionId(), 'register'),
          undefined,
          { rawBody: 'hello', headers: { 'content-type': 'text/plain' } },
        ],
        400,
        'invalid_worker_request',
      ],
      [
        'a slot count above the maximum',
        () => [
          workerA,
          ingressPath('worker-a', newSessionId(), 'register'),
          registerBody({ availableSlots: 5 }),
        ],
        400,
        'invalid_worker_request',
      ],
    ])('%s', async (_name, args, status, code) => {
      const before = await snapshotDatabase(t.plane.core.db);
      const res = await t.ingress(...args());
      expect(res.status).toBe(status);
      expect(res.body).toMatchObject({ code });
      expect(await snapshotDatabase(t.plane.core.db)).toEqual(before);
    });
  });
});
