/**
 * Issue 15 item 11 (ADR 0033): TLS checks a client certificate once, at the handshake, and the
 * principal is cached per connection. A certificate that expires while its keep-alive connection is
 * open is refused on that same connection from `notAfter` on (validity is checked per request), and
 * no connection serves requests for longer than QL_INGRESS_CONNECTION_MAX_MS, nor carries a request in
 * flight for longer than that again (issue 27 item 8). The edge alone decides
 * here, before any repository call, so one dialect shows it (SQLite).
 */
import { readFileSync } from 'node:fs';
import { ingressPath } from '@ql/contracts';
import { PemPair } from '../../apps/control-plane/src/pki';
import { newSessionId, registerBody } from '../support/fixtures';
import { RawConnection } from '../support/raw-http';
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
    pki = await createTestPki(['worker-a', 'worker-b', 'worker-c']);
    ca = readFileSync(pki.caCertPath);
  });
  afterAll(async () => {
    await db?.dispose();
    pki?.remove();
  });

  /** Registers `workerId` over `conn`; answers the session's path maker and fence. */
  async function register(conn: RawConnection, workerId: string) {
    const sessionId = newSessionId();
    const res = await conn.post(ingressPath(workerId, sessionId, 'register'), registerBody());
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
          conn.post(session.path('heartbeat'), {
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
        const refused = await late.post(ingressPath('worker-x', newSessionId(), 'register'), registerBody());
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

    /** A held pull of `waitMs` on a registered worker's connection: it answers `idle` at its end. */
    async function heldPull(conn: RawConnection, workerId: string, waitMs: number) {
      const session = await register(conn, workerId);
      return conn.post(session.path('offers'), {
        generation: session.generation,
        expectedVersion: session.version,
        offerId: newSessionId(),
        leaseToken: 'x'.repeat(43),
        waitMs,
      });
    }

    it('a request in flight when the bound passes is answered in full, says `Connection: close`, and the connection closes', async () => {
      const conn = await RawConnection.open(t.plane.ingressUrl, {
        ca,
        credentials: readPair(pki.workers['worker-b']!),
      });
      try {
        // Held for the bound itself, from after the register: the bound passes while it waits, and
        // it ends within the bound's second term (a request in flight gets as long again).
        const held = await heldPull(conn, 'worker-b', CONNECTION_MAX_MS);
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

    it('a request still in flight once the bound has passed twice is ended without its answer', async () => {
      const conn = await RawConnection.open(t.plane.ingressUrl, {
        ca,
        credentials: readPair(pki.workers['worker-c']!),
      });
      try {
        // Held for four times the bound: the connection is cut at twice the bound, mid-wait.
        await expect(
          within(
            'the server ending the held request',
            CLOSED_WITHIN_MS,
            heldPull(conn, 'worker-c', 4 * CONNECTION_MAX_MS),
          ),
        ).rejects.toThrow(/connection closed|ECONNRESET|socket hang up/);
      } finally {
        conn.destroy();
      }
    });

    it('a request body trickled on a worker connection is ended once the bound has passed twice', async () => {
      const conn = await RawConnection.open(t.plane.ingressUrl, {
        ca,
        credentials: readPair(pki.workers['worker-a']!),
      });
      try {
        await within(
          'the server cutting the trickled body',
          CLOSED_WITHIN_MS,
          conn.trickle(
            `POST ${ingressPath('worker-a', newSessionId(), 'register')} HTTP/1.1\r\nHost: localhost\r\n` +
              'Content-Type: application/json\r\nContent-Length: 2000\r\n\r\n{',
            ' ',
          ),
        );
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
