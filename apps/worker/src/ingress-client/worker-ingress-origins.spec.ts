// R-WRK-7: one client, several real TLS 1.3 listeners standing in for control-plane replicas.
import { once } from 'node:events';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Server as TcpServer, Socket, createServer as createTcpServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { ingressPath } from '@ql/contracts';
import { freePort } from '../../../../test/support/entry-points';
import { newSessionId } from '../../../../test/support/fixtures';
import { TRUST_DOMAIN, createTestPki, createWorkerCert } from '../../../../test/support/test-plane';
import { closedWithin, startTlsTestServer, workerPem } from '../../../../test/support/tls-test-server';
import {
  IngressCallError,
  OriginChange,
  WorkerIngressHttpsClient,
  WorkerTlsCredentials,
} from './worker-ingress-https.client';

type Handler = (req: IncomingMessage, res: ServerResponse) => void;

interface Replica {
  readonly origin: string;
  readonly requests: Array<{ url: string; body: string }>;
  readonly connections: TLSSocket[];
  handler: Handler;
  close(): Promise<void>;
}

const answer = (res: ServerResponse, status: number, body: unknown) => {
  const bytes = Buffer.from(JSON.stringify(body));
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': String(bytes.length) });
  res.end(bytes);
};
const sessionAnswer = (version: number) => ({
  workerId: 'worker-a',
  sessionId: 'x',
  generation: 3,
  version,
  status: 'online',
  leaseExpiresAt: new Date().toISOString(),
  maxConcurrentRuns: 1,
  availableSlots: 1,
});
const ok: Handler = (_req, res) => answer(res, 200, sessionAnswer(8));
const unavailable: Handler = (_req, res) =>
  answer(res, 503, { code: 'worker_ingress_unavailable', message: 'database unavailable' });
const fence = { generation: 3, expectedVersion: 7, availableSlots: 1 };

describe('WorkerIngressHttpsClient with several origins (R-WRK-7)', () => {
  let pki: Awaited<ReturnType<typeof createTestPki>>;
  let credentials: WorkerTlsCredentials;
  let replicas: Replica[];
  let client: WorkerIngressHttpsClient | undefined;

  async function startReplica(handler: Handler = ok): Promise<Replica> {
    const requests: Replica['requests'] = [];
    const { server, origin, connections } = await startTlsTestServer(pki, (req, res, body) => {
      requests.push({ url: req.url ?? '', body: body.toString('utf8') });
      replica.handler(req, res);
    });
    const replica: Replica = {
      origin,
      requests,
      connections,
      handler,
      close: async () => {
        server.closeAllConnections();
        server.close();
        await once(server, 'close');
      },
    };
    replicas.push(replica);
    return replica;
  }

  const newClient = (origins: string[], timeoutMs = 5000, onOriginChange?: (c: OriginChange) => void) =>
    (client = new WorkerIngressHttpsClient({
      origins,
      workerId: 'worker-a',
      credentials: () => credentials,
      timeoutMs,
      ...(onOriginChange ? { onOriginChange } : {}),
    }));
  /** The error a call must fail with. */
  const callError = (promise: Promise<unknown>): Promise<IngressCallError> =>
    promise.then(
      () => Promise.reject(new Error('the call should have failed')),
      (e: unknown) => (e instanceof IngressCallError ? e : Promise.reject(e)),
    );

  beforeAll(async () => {
    pki = await createTestPki(['worker-a']);
    credentials = workerPem(pki, 'worker-a');
  });
  beforeEach(() => {
    replicas = [];
    client = undefined;
  });
  afterEach(async () => {
    await client?.close();
    await Promise.all(replicas.map((r) => r.close()));
  });

  it('moves to the next origin when the first refuses the connection, with the same session and fence', async () => {
    const b = await startReplica();
    const c = newClient([`https://127.0.0.1:${await freePort()}`, b.origin]);
    const sessionId = newSessionId();
    await expect(c.call('heartbeat', sessionId, fence)).resolves.toMatchObject({ version: 8 });
    expect(b.requests).toEqual([
      { url: ingressPath('worker-a', sessionId, 'heartbeat'), body: JSON.stringify(fence) },
    ]);
    expect(c.preferredOrigin).toBe(b.origin);
  });

  it('sends the very same call to the next replica on 503 worker_ingress_unavailable, and sticks to the one that answered', async () => {
    const a = await startReplica(unavailable);
    const b = await startReplica();
    const c = newClient([a.origin, b.origin]);
    const sessionId = newSessionId();
    await c.call('heartbeat', sessionId, fence);
    expect(a.requests).toHaveLength(1);
    expect(b.requests).toEqual(a.requests); // same path (worker, session) and same body (fence)
    // Sticky: replica A would answer now, but the next calls go to B, the one that last worked.
    a.handler = ok;
    await c.call('heartbeat', sessionId, { ...fence, expectedVersion: 8 });
    await c.call('drain', sessionId, { generation: 3, expectedVersion: 9 });
    expect(a.requests).toHaveLength(1);
    expect(b.requests.map((r) => r.url.split('/').pop())).toEqual(['heartbeat', 'heartbeat', 'drain']);
    // R-WIRE-4 per origin: one keep-alive socket each.
    expect(a.connections).toHaveLength(1);
    expect(b.connections).toHaveLength(1);
  });

  it('reports a change of the answering origin once, with the error that moved it: not per call, and again when it moves back', async () => {
    const a = await startReplica();
    const b = await startReplica();
    const changes: OriginChange[] = [];
    const c = newClient([a.origin, b.origin], 5000, (change) => changes.push(change));
    const sessionId = newSessionId();
    await c.call('heartbeat', sessionId, fence);
    expect(changes).toEqual([]); // the first origin answered: nothing changed

    a.handler = unavailable;
    // Three calls at once all move to B: one report.
    await Promise.all([1, 2, 3].map(() => c.call('heartbeat', sessionId, fence)));
    await c.call('heartbeat', sessionId, fence);
    expect(changes).toEqual([
      {
        from: a.origin,
        to: b.origin,
        action: 'heartbeat',
        cause: `${a.origin} (worker_ingress_unavailable)`,
      },
    ]);

    a.handler = ok;
    b.handler = (req) => req.socket.destroy();
    await c.call('drain', sessionId, { generation: 3, expectedVersion: 9 });
    expect(changes.slice(1)).toEqual([
      {
        from: b.origin,
        to: a.origin,
        action: 'drain',
        cause: expect.stringMatching(new RegExp(`^${b.origin} \\((transport_error|length_mismatch)`)),
      },
    ]);
  });

  it('sends the call again to the next replica when the answer is cut off (a lost answer)', async () => {
    const a = await startReplica((req) => req.socket.destroy());
    const b = await startReplica();
    const c = newClient([a.origin, b.origin]);
    await expect(c.call('heartbeat', newSessionId(), fence)).resolves.toMatchObject({ version: 8 });
    expect(a.requests).toHaveLength(1);
    expect(b.requests).toEqual(a.requests);
  });

  it('moves on from an origin that takes the connection but never finishes TLS, within its share of the deadline', async () => {
    const silent: TcpServer = createTcpServer((socket: Socket) => socket.on('error', () => undefined));
    const held: Socket[] = [];
    silent.on('connection', (socket: Socket) => held.push(socket));
    silent.listen(0, '127.0.0.1');
    await once(silent, 'listening');
    try {
      const b = await startReplica();
      const c = newClient([`https://127.0.0.1:${(silent.address() as AddressInfo).port}`, b.origin], 2000);
      await expect(c.call('heartbeat', newSessionId(), fence)).resolves.toMatchObject({ version: 8 });
      expect(b.requests).toHaveLength(1);
      expect(held).toHaveLength(1);
    } finally {
      for (const socket of held) socket.destroy();
      silent.close();
    }
  });

  it('never sends a call that got an answer — a 4xx, a 503 of another kind — to another origin', async () => {
    const a = await startReplica((_req, res) =>
      answer(res, 409, { code: 'worker_session_fenced', message: 'fenced', reason: 'version_mismatch' }),
    );
    const b = await startReplica();
    const c = newClient([a.origin, b.origin]);
    const error = await callError(c.call('heartbeat', newSessionId(), fence));
    expect(error).toMatchObject({ status: 409, fenced: true, reason: 'version_mismatch' });
    a.handler = (_req, res) => answer(res, 400, { code: 'invalid_request', message: 'bad' });
    await expect(callError(c.call('heartbeat', newSessionId(), fence))).resolves.toMatchObject({
      status: 400,
    });
    // A 503 that is not the replica's own "cannot serve" is an answer too.
    a.handler = (_req, res) => answer(res, 503, { code: 'maintenance', message: 'later' });
    await expect(callError(c.call('heartbeat', newSessionId(), fence))).resolves.toMatchObject({
      status: 503,
    });
    expect(b.requests).toEqual([]);
    expect(c.preferredOrigin).toBe(a.origin); // an origin that answers keeps the preference
  });

  it.each([
    ['with a content-length', true],
    ['chunked, without a content-length', false],
  ])(
    'never sends a call whose 4xx answer was cut short mid-body (%s) to another origin',
    async (_name, declared) => {
      const bytes = Buffer.from(
        JSON.stringify({ code: 'worker_session_fenced', message: 'fenced', reason: 'version_mismatch' }),
      );
      // The status line and half the body leave; then the connection closes (no clean end).
      const a = await startReplica((req, res) => {
        res.writeHead(409, {
          'content-type': 'application/json',
          ...(declared ? { 'content-length': String(bytes.length) } : {}),
        });
        res.write(bytes.subarray(0, bytes.length >> 1), () => req.socket.destroy());
      });
      const b = await startReplica();
      const c = newClient([a.origin, b.origin]);
      const error = await callError(c.call('heartbeat', newSessionId(), fence));
      expect(error).toMatchObject({
        status: 409,
        code: declared ? 'length_mismatch' : 'transport_error',
      });
      expect(a.requests).toHaveLength(1);
      expect(b.requests).toEqual([]);
      expect(c.preferredOrigin).toBe(a.origin);
    },
  );

  it('rotated credentials retire the agent of every origin, not only the one in use', async () => {
    const a = await startReplica(unavailable);
    const b = await startReplica();
    let current = credentials;
    const c = (client = new WorkerIngressHttpsClient({
      origins: [a.origin, b.origin],
      workerId: 'worker-a',
      credentials: () => current,
    }));
    await c.call('heartbeat', newSessionId(), fence); // A answers 503, B answers: one socket each
    expect([a.connections.length, b.connections.length]).toEqual([1, 1]);
    const rotated = await createWorkerCert(pki.caPair(), { workerId: 'worker-a', trustDomain: TRUST_DOMAIN });
    current = { ...credentials, certPem: rotated.certPem, keyPem: rotated.keyPem };
    await c.call('heartbeat', newSessionId(), fence); // goes to B only
    // A's idle socket on the old certificate is closed too, without a call to A.
    await closedWithin([a.connections[0]!, b.connections[0]!], 3000);
    expect(b.connections).toHaveLength(2);
    expect(a.requests).toHaveLength(1);
  });

  it('fails with one clear error naming every origin when none answers', async () => {
    const a = await startReplica(unavailable);
    const down = `https://127.0.0.1:${await freePort()}`;
    const c = newClient([a.origin, down]);
    const error = await callError(c.call('heartbeat', newSessionId(), fence));
    expect(error).toMatchObject({ status: 0, code: 'control_plane_unavailable', reason: 'transport_error' });
    expect(error.message).toBe(
      `heartbeat: no control-plane origin answered: ${a.origin} (worker_ingress_unavailable); ${down} (transport_error ECONNREFUSED)`,
    );
    expect(a.requests).toHaveLength(1); // each origin once per call, no loop
  });

  it('with one origin, a transport failure is the plain error it always was', async () => {
    const c = newClient([`https://127.0.0.1:${await freePort()}`]);
    await expect(callError(c.call('heartbeat', newSessionId(), fence))).resolves.toMatchObject({
      status: 0,
      code: 'transport_error',
      reason: 'ECONNREFUSED',
    });
  });

  it('refuses an empty list, more than eight origins, and an origin listed twice', () => {
    const build = (origins: string[]) => () => newClient(origins);
    expect(build([])).toThrow(TypeError);
    expect(build(Array.from({ length: 9 }, (_, i) => `https://cp-${i}:8443`))).toThrow(/1\.\.8 origins/);
    expect(build(['https://cp:8443', 'https://CP:8443/'])).toThrow(/appears twice/);
  });
});
