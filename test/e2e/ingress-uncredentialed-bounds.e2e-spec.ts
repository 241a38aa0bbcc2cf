/**
 * Issue 27 item 8 (ADR 0045 "the unauthenticated edge"): the ingress serves enrollment without a
 * client certificate, so anyone may open connections to it. With real TLS sockets: a connection that
 * never finishes its handshake, or finishes it and sends nothing, is closed; a request trickled in
 * (head or body) is cut; connections without a trusted certificate are capped per address and in
 * total, and a worker with its certificate still connects and is served while the cap is full. The
 * edge alone decides, before any repository call, so one dialect shows it (SQLite).
 */
import { readFileSync } from 'node:fs';
import { Socket, connect as netConnect } from 'node:net';
import { INGRESS_ENROLL_PATH, ingressPath } from '@ql/contracts';
import { newSessionId, registerBody } from '../support/fixtures';
import { RawConnection } from '../support/raw-http';
import { within } from '../support/remote-run-harness';
import {
  TestDatabase,
  TestPlane,
  createTestDatabase,
  createTestPki,
  readPair,
  startTestPlane,
} from '../support/test-plane';

jest.setTimeout(90_000);

/** What "closed by the server" may take at most on a loaded machine: it only bounds a hang. */
const CLOSED_WITHIN_MS = 20_000;
/** Settings the cap tests keep out of the way: nothing times out while they run. */
const LONG_MS = '120000';

describe('ingress connections without a client certificate', () => {
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

  const open = (t: TestPlane, localAddress?: string) =>
    RawConnection.open(t.plane.ingressUrl, { ca, credentials: null, localAddress });

  /** A plain TCP connection to the ingress that never sends a byte (no ClientHello). */
  function tcp(t: TestPlane): Promise<{ socket: Socket; closed: Promise<void> }> {
    const { hostname, port } = new URL(t.plane.ingressUrl);
    return new Promise((resolve, reject) => {
      const socket = netConnect(Number(port), hostname);
      const closed = new Promise<void>((done) => socket.once('close', () => done()));
      socket.on('error', () => undefined); // a reset is a close too
      socket.once('connect', () => resolve({ socket, closed }));
      closed.then(() => reject(new Error('closed before connecting')), reject);
    });
  }

  /** A request the gate answers (401) on an open uncredentialed connection: it is still served. */
  async function stillServed(conn: RawConnection): Promise<number> {
    await conn.write('POST /nope HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n\r\n');
    return (await conn.response()).status;
  }

  describe('timeouts (handshake and request 500 ms)', () => {
    let t: TestPlane;
    beforeAll(async () => {
      t = await startTestPlane(db, pki, {
        QL_INGRESS_HANDSHAKE_TIMEOUT_MS: '500',
        QL_INGRESS_UNCREDENTIALED_TIMEOUT_MS: '500',
      });
    });
    afterAll(async () => {
      await t?.close();
    });

    it('a connection that never starts its TLS handshake is closed', async () => {
      const { socket, closed } = await tcp(t);
      try {
        await within('the server closing a stalled handshake', CLOSED_WITHIN_MS, closed);
      } finally {
        socket.destroy();
      }
    });

    it('a connection that completes its handshake without a certificate and sends nothing is closed', async () => {
      const conn = await open(t);
      try {
        await within('the server closing an idle uncredentialed connection', CLOSED_WITHIN_MS, conn.closed());
      } finally {
        conn.destroy();
      }
    });

    it('an uncredentialed connection is closed when idle after an answer, too', async () => {
      const conn = await open(t);
      try {
        expect(await stillServed(conn)).toBe(401);
        await within('the server closing it once idle', CLOSED_WITHIN_MS, conn.closed());
      } finally {
        conn.destroy();
      }
    });

    it('a request head trickled in a byte at a time is cut', async () => {
      const conn = await open(t);
      try {
        await within(
          'the server cutting a trickled head',
          CLOSED_WITHIN_MS,
          conn.trickle(`POST ${INGRESS_ENROLL_PATH} HTTP/1.1\r\nHost: localhost\r\n`, 'X-Slow: 1\r\n'),
        );
      } finally {
        conn.destroy();
      }
    });

    it('an enrollment body trickled in a byte at a time is cut', async () => {
      const conn = await open(t);
      try {
        await within(
          'the server cutting a trickled body',
          CLOSED_WITHIN_MS,
          conn.trickle(
            `POST ${INGRESS_ENROLL_PATH} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n` +
              'Content-Length: 10000\r\n\r\n{"workerId":"',
            'a',
          ),
        );
      } finally {
        conn.destroy();
      }
    });

    it('a worker with its certificate keeps an idle connection (the request timeout is for the uncredentialed)', async () => {
      const conn = await RawConnection.open(t.plane.ingressUrl, {
        ca,
        credentials: readPair(pki.workers['worker-a']!),
      });
      try {
        // Four times the timeout: a deadline that would have closed it has passed by then.
        const closed = await within(
          'a quiet spell',
          CLOSED_WITHIN_MS,
          Promise.race([
            conn.closed().then(() => true),
            new Promise((r) => setTimeout(() => r(false), 2_000)),
          ]),
        );
        expect(closed).toBe(false);
        const registered = await conn.post(
          ingressPath('worker-a', newSessionId(), 'register'),
          registerBody(),
        );
        expect(registered.status).toBe(200);
      } finally {
        conn.destroy();
      }
    });
  });

  describe('the cap per address (3) and in total (4)', () => {
    let t: TestPlane;
    beforeAll(async () => {
      t = await startTestPlane(db, pki, {
        QL_INGRESS_HANDSHAKE_TIMEOUT_MS: LONG_MS,
        QL_INGRESS_UNCREDENTIALED_TIMEOUT_MS: LONG_MS,
        QL_INGRESS_UNCREDENTIALED_PER_ADDRESS: '3',
        QL_INGRESS_UNCREDENTIALED_MAX: '4',
        QL_SESSION_LEASE_MS: '600000',
      });
    });
    afterAll(async () => {
      await t?.close();
    });

    /** The server closes a refused connection right after its handshake, before a byte of HTTP. */
    const refused = (conn: Promise<RawConnection>) =>
      within(
        'the server closing a connection over the cap',
        CLOSED_WITHIN_MS,
        conn.then(
          (c) => c.closed(),
          () => undefined, // reset before the client saw its handshake end: refused as well
        ),
      );

    it('refuses the 4th uncredentialed connection from one address, serves the 3, and a worker connects and is served meanwhile', async () => {
      const held = [await open(t), await open(t), await open(t)];
      try {
        await refused(open(t));
        for (const conn of held) expect(await stillServed(conn)).toBe(401);
        // A worker from the same address, with its certificate: not counted, served.
        const registered = await t.ingress(
          readPair(pki.workers['worker-b']!),
          ingressPath('worker-b', newSessionId(), 'register'),
          registerBody(),
        );
        expect(registered.status).toBe(200);
        // One closed: a new one is let in again.
        held.pop()!.destroy();
        const again = await within(
          'a place freed by a close',
          CLOSED_WITHIN_MS,
          (async () => {
            for (;;) {
              const conn = await open(t);
              const status = await stillServed(conn).catch(() => 0);
              if (status === 401) return conn;
              conn.destroy(); // the server had not seen the close yet
            }
          })(),
        );
        held.push(again);
      } finally {
        for (const conn of held) conn.destroy();
      }
    });

    it('refuses beyond the listener’s total across addresses', async () => {
      // 127.0.0.2 is loopback too: a second source address.
      const held = [await open(t), await open(t), await open(t, '127.0.0.2')];
      try {
        // 127.0.0.2 holds 1 of its 3, but the listener holds 3 of 4: one more, then none.
        held.push(await open(t, '127.0.0.2'));
        expect(await stillServed(held[3]!)).toBe(401);
        await refused(open(t, '127.0.0.2'));
        for (const conn of held) expect(await stillServed(conn)).toBe(401);
      } finally {
        for (const conn of held) conn.destroy();
      }
    });

    it('refuses a 4th connection from one address still in its handshake, at once', async () => {
      const stalled = [await tcp(t), await tcp(t), await tcp(t)];
      try {
        const fourth = await tcp(t).catch(() => null); // closed before `connect` was seen: refused
        if (fourth) await within('the 4th handshake refused', CLOSED_WITHIN_MS, fourth.closed);
        // The handshake timeout is 2 min: the three are still open.
        expect(stalled.map((s) => s.socket.destroyed)).toEqual([false, false, false]);
      } finally {
        for (const s of stalled) s.socket.destroy();
      }
    });
  });

  it('each bound is refused out of range at start, with its name', async () => {
    const cases: [string, string][] = [
      ['QL_INGRESS_HANDSHAKE_TIMEOUT_MS', '99'],
      ['QL_INGRESS_HANDSHAKE_TIMEOUT_MS', '120001'],
      ['QL_INGRESS_UNCREDENTIALED_TIMEOUT_MS', '0'],
      ['QL_INGRESS_UNCREDENTIALED_PER_ADDRESS', '0'],
      ['QL_INGRESS_UNCREDENTIALED_MAX', 'many'],
    ];
    for (const [name, value] of cases)
      await expect(startTestPlane(db, pki, { [name]: value })).rejects.toThrow(new RegExp(name));
    await expect(
      startTestPlane(db, pki, {
        QL_INGRESS_UNCREDENTIALED_PER_ADDRESS: '10',
        QL_INGRESS_UNCREDENTIALED_MAX: '5',
      }),
    ).rejects.toThrow(/QL_INGRESS_UNCREDENTIALED_PER_ADDRESS=10 is over QL_INGRESS_UNCREDENTIALED_MAX=5/);
  });
});
