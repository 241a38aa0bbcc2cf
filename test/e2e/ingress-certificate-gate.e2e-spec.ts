/**
 * ADR 0045 §2: the ingress lets a handshake without a trusted client certificate through, for the
 * enrollment route alone. The gate (the listener's first hook) answers 401 to every other request on
 * such a connection before routing, body parsing or any repository call. The routes are read from
 * the listener itself, so a route added later is covered without a list to keep up to date.
 */
import { readFileSync } from 'node:fs';
import { Agent, request as httpsRequest } from 'node:https';
import type { TLSSocket } from 'node:tls';
import { INGRESS_ENROLL_PATH, INGRESS_PREFIX } from '@ql/contracts';
import { PemPair, createCa, createWorkerCert } from '../../apps/control-plane/src/pki';
import { registeredRoutes } from '../support/admin-routes';
import { newSessionId } from '../support/fixtures';
import {
  Dialect,
  TRUST_DOMAIN,
  TestDatabase,
  TestPlane,
  createTestDatabase,
  createTestPki,
  readPair,
  startTestPlane,
} from '../support/test-plane';

type TestPki = Awaited<ReturnType<typeof createTestPki>>;

describe.each<Dialect>(['sqlite', 'postgres'])('ingress certificate gate (%s)', (dialect) => {
  let db: TestDatabase;
  let pki: TestPki;
  let t: TestPlane;
  /** Client credentials the ingress does not trust: none, another CA's, and an expired one of its own CA. */
  let untrusted: [string, PemPair | null][];
  let workerA: PemPair;

  beforeAll(async () => {
    db = await createTestDatabase(dialect);
    pki = await createTestPki(['worker-a']);
    t = await startTestPlane(db, pki, { QL_INGRESS_RATE_BURST: '100000' });
    workerA = readPair(pki.workers['worker-a']!);
    const stranger = await createWorkerCert(await createCa({ commonName: 'someone else' }), {
      workerId: 'worker-a',
      trustDomain: TRUST_DOMAIN,
    });
    const expired = await createWorkerCert(pki.caPair(), {
      workerId: 'worker-a',
      trustDomain: TRUST_DOMAIN,
      notBefore: new Date('2020-01-01T00:00:00Z'),
      notAfter: new Date('2020-01-02T00:00:00Z'),
    });
    untrusted = [
      ['no certificate', null],
      ["another CA's certificate", stranger],
      ['an expired certificate', expired],
    ];
  });
  afterAll(async () => {
    await t?.close();
    await db?.dispose();
    pki?.remove();
  });

  /** The route's path with its parameters filled in. */
  const concrete = (url: string) =>
    url
      .replace(':workerId', 'worker-a')
      .replace(':sessionId', newSessionId())
      .replace(/:[A-Za-z]+/g, 'x');

  /** 401 worker_authentication_required, not one statement: the request never got past the gate. */
  async function expectGated(
    credentials: PemPair | null,
    path: string,
    method = 'POST',
    rawBody = '{"not json',
  ) {
    const before = t.statements();
    const res = await t.ingress(credentials, path, undefined, {
      method,
      ...(method === 'GET' ? {} : { rawBody, headers: { 'content-type': 'application/json' } }),
    });
    expect({ path, method, status: res.status, body: res.body }).toEqual({
      path,
      method,
      status: 401,
      body: { code: 'worker_authentication_required', message: expect.any(String) },
    });
    expect(t.statements()).toBe(before);
  }

  it('refuses every registered route but enrollment, before its body is parsed', async () => {
    const routes = registeredRoutes(t.plane.ingress).filter((r) => r.url !== INGRESS_ENROLL_PATH);
    expect(routes.length).toBeGreaterThanOrEqual(12); // the session, lease and activation actions
    for (const [, credentials] of untrusted)
      for (const route of routes) await expectGated(credentials, concrete(route.url), route.method);
  });

  it('refuses paths no route serves (not 404: nothing is told before a certificate)', async () => {
    const paths = ['/', '/nope', `${INGRESS_PREFIX}/worker-a/sessions/x/nope`, '/api/v3/worker-ingress'];
    for (const [, credentials] of untrusted) for (const path of paths) await expectGated(credentials, path);
    // With a trusted certificate the same path reaches the router: 404.
    const res = await t.ingress(workerA, '/nope', {});
    expect(res).toMatchObject({ status: 404, body: { code: 'worker_route_not_found' } });
  });

  it('lets exactly POST on the enrollment path through, nothing that merely looks like it', async () => {
    const lookalikes: [string, string][] = [
      ['GET', INGRESS_ENROLL_PATH],
      ['PUT', INGRESS_ENROLL_PATH],
      ['POST', `${INGRESS_ENROLL_PATH}/`],
      ['POST', `${INGRESS_ENROLL_PATH}?x=1`],
      ['POST', `${INGRESS_ENROLL_PATH}x`],
      ['POST', `${INGRESS_ENROLL_PATH}/../workers/worker-a/certificate`],
      ['POST', `${INGRESS_ENROLL_PATH.toUpperCase()}`],
      ['POST', `${INGRESS_PREFIX}/worker-a/enroll`],
    ];
    for (const [, credentials] of untrusted)
      for (const [method, path] of lookalikes) await expectGated(credentials, path, method);
    for (const [name, credentials] of untrusted) {
      const res = await t.ingress(credentials, INGRESS_ENROLL_PATH, {});
      expect({ name, status: res.status }).not.toEqual({ name, status: 401 });
    }
  });

  it('a TLS 1.3 session resumed from a handshake without a certificate is still refused', async () => {
    // Node calls such a resumed session `authorized`: the gate must also see a certificate.
    const agent = new Agent({ ca: readFileSync(pki.caCertPath), keepAlive: false, maxCachedSessions: 10 });
    const post = (path: string) =>
      new Promise<{ status: number; reused: boolean }>((resolve, reject) => {
        const req = httpsRequest(new URL(path, t.plane.ingressUrl), {
          method: 'POST',
          agent,
          servername: 'localhost',
          headers: { 'content-type': 'application/json' },
        });
        req.on('error', reject);
        req.on('response', (res) => {
          const reused = (res.socket as TLSSocket).isSessionReused();
          res.resume();
          res.on('end', () => resolve({ status: res.statusCode ?? 0, reused }));
        });
        req.end('{}');
      });
    try {
      expect((await post(INGRESS_ENROLL_PATH)).reused).toBe(false);
      const before = t.statements();
      // A path no route serves: past the gate the router would answer 404.
      expect(await post(`${INGRESS_PREFIX}/worker-a/nope`)).toEqual({
        status: 401,
        reused: true,
      });
      expect(t.statements()).toBe(before);
    } finally {
      agent.destroy();
    }
  });
});
