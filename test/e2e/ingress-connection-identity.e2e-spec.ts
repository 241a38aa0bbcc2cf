/**
 * Issue 15 item 11 (ADR 0033): TLS checks a client certificate once, at the handshake, and the
 * principal is cached per connection. A certificate that expires while its keep-alive connection is
 * open is refused on that same connection from `notAfter` on (validity is checked per request), and
 * no connection serves requests for longer than QL_INGRESS_CONNECTION_MAX_MS. The edge alone decides
 * here, before any repository call, so one dialect shows it (SQLite).
 */
import { readFileSync } from 'node:fs';
import { ingressPath } from '@ql/contracts';
import { PemPair } from '../../apps/control-plane/src/pki';
import { newSessionId, registerBody } from '../support/fixtures';
import { RawConnection, RawResponse } from '../support/raw-http';
import { eventually, within } from '../support/remote-run-harness';
import {
  TRUST_DOMAIN,
  TestDatabase,
  TestPlane,
  createTestDatabase,
  createTestPki,
  createWorkerCert,
  readPair,
  startTestPlane,
} from '../support/test-plane';

jest.setTimeout(60_000);

/** The bound under test: short, so a test sees it pass; far below Fastify's 72 s keep-alive timeout. */
const CONNECTION_MAX_MS = 1_500;
/** What "closed by the server once older than the bound" may take at most on a loaded machine. */
const CLOSED_WITHIN_MS = 20_000;

describe('one ingress connection and its certificate over time', () => {
  let db: TestDatabase;
  let pki: Awaited<ReturnType<typeof createTestPki>>;
  let ca: Buffer;

  beforeAll(async () => {
    db = await createTestDatabase('sqlite');
    pki = await createTestPki(['worker-a', 'worker-b']);
    ca = readFileSync(pki.caCertPath);
  });
  afterAll(async () => {
    await db?.dispose();
    pki?.remove();
  });

  /** One POST on the connection, read to its end. */
  async function post(conn: RawConnection, path: string, body: unknown): Promise<RawResponse> {
    const payload = JSON.stringify(body);
    await conn.write(
      `POST ${path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n` +
        `Content-Length: ${Buffer.byteLength(payload)}\r\n\r\n${payload}`,
    );
    return conn.response();
  }

  /** Registers `workerId` over `conn`; answers the session's path maker and fence. */
  async function register(conn: RawConnection, workerId: string) {
    const sessionId = newSessionId();
    const res = await post(conn, ingressPath(workerId, sessionId, 'register'), registerBody());
    expect(res.status).toBe(200);
    const { generation, version } = res.body as { generation: number; version: number };
    return {
      path: (action: 'heartbeat' | 'offers') => ingressPath(workerId, sessionId, action),
      generation,
      version,
    };
  }

  describe('a certificate that expires on an open keep-alive connection', () => {
    let t: TestPlane;
    beforeAll(async () => {
      t = await startTestPlane(db, pki, { QL_INGRESS_RATE_BURST: '100000', QL_SESSION_LEASE_MS: '600000' });
    });
    afterAll(async () => {
      await t?.close();
    });

    it('is served before notAfter and refused after it on the same socket, with the edge’s invalid-certificate code', async () => {
      // X.509 times have whole seconds: notAfter is the first whole second at least 3 s from now.
      const notAfter = new Date(Math.ceil((Date.now() + 3_000) / 1_000) * 1_000);
      const shortLived: PemPair = await createWorkerCert(pki.caPair(), {
        workerId: 'worker-x',
        trustDomain: TRUST_DOMAIN,
        notBefore: new Date(Date.now() - 60_000),
        notAfter,
      });
      const conn = await RawConnection.open(t.plane.ingressUrl, { ca, credentials: shortLived });
      try {
        const session = await register(conn, 'worker-x');
        const beat = (version: number) =>
          post(conn, session.path('heartbeat'), {
            generation: session.generation,
            expectedVersion: version,
            availableSlots: 1,
          });
        const before = await beat(session.version);
        expect(before.status).toBe(200);
        expect(before.headers.connection).not.toBe('close');
        // The point is the wall clock passing notAfter (validity is inclusive: one ms past it).
        await eventually('notAfter to pass', () => (Date.now() > notAfter.getTime() ? true : undefined), {
          pollMs: 50,
        });
        const statements = t.statements();
        const after = await beat((before.body as { version: number }).version);
        expect({ status: after.status, body: after.body }).toEqual({
          status: 401,
          body: { code: 'worker_authentication_required', message: 'the certificate has expired' },
        });
        expect(t.statements()).toBe(statements); // refused at the edge: not one statement
      } finally {
        conn.destroy();
      }
      // A new connection with it is not trusted (TLS finds it expired; since ADR 0045 §2 the
      // handshake goes on, for enrollment): the gate answers 401 before any statement.
      const late = await RawConnection.open(t.plane.ingressUrl, { ca, credentials: shortLived });
      try {
        const statements = t.statements();
        const refused = await post(late, ingressPath('worker-x', newSessionId(), 'register'), registerBody());
        expect({ status: refused.status, body: refused.body }).toEqual({
          status: 401,
          body: { code: 'worker_authentication_required', message: expect.any(String) },
        });
        expect(t.statements()).toBe(statements);
      } finally {
        late.destroy();
      }
    });
  });

  describe(`QL_INGRESS_CONNECTION_MAX_MS=${CONNECTION_MAX_MS}`, () => {
    let t: TestPlane;
    beforeAll(async () => {
      t = await startTestPlane(db, pki, {
        QL_INGRESS_RATE_BURST: '100000',
        QL_SESSION_LEASE_MS: '600000',
        QL_INGRESS_CONNECTION_MAX_MS: String(CONNECTION_MAX_MS),
        QL_OFFER_RECHECK_MS: '60000',
      });
    });
    afterAll(async () => {
      await t?.close();
    });

    it('an idle connection is closed by the server once older than the bound', async () => {
      const conn = await RawConnection.open(t.plane.ingressUrl, {
        ca,
        credentials: readPair(pki.workers['worker-a']!),
      });
      try {
        await register(conn, 'worker-a');
        await within('the server closing the idle connection', CLOSED_WITHIN_MS, conn.closed());
      } finally {
        conn.destroy();
      }
    });

    it('a request in flight when the bound passes is answered in full, says `Connection: close`, and the connection closes', async () => {
      const conn = await RawConnection.open(t.plane.ingressUrl, {
        ca,
        credentials: readPair(pki.workers['worker-b']!),
      });
      try {
        const session = await register(conn, 'worker-b');
        // A pull held for twice the bound: the bound passes while it waits, and it answers idle.
        const held = await post(conn, session.path('offers'), {
          generation: session.generation,
          expectedVersion: session.version,
          offerId: newSessionId(),
          leaseToken: 'x'.repeat(43),
          waitMs: 2 * CONNECTION_MAX_MS,
        });
        expect({ status: held.status, connection: held.headers.connection, body: held.body }).toMatchObject({
          status: 200,
          connection: 'close',
          body: { status: 'idle' },
        });
        await within('the server closing the connection after its answer', CLOSED_WITHIN_MS, conn.closed());
      } finally {
        conn.destroy();
      }
    });
  });

  it('the setting is refused out of range, with its name', async () => {
    for (const value of ['999', '86400001', 'soon']) {
      await expect(startTestPlane(db, pki, { QL_INGRESS_CONNECTION_MAX_MS: value })).rejects.toThrow(
        /QL_INGRESS_CONNECTION_MAX_MS/,
      );
    }
  });
});
