// Size: one real TLS server exercises every rule of the client; the cases share it.
import { parseStrictJson } from '@ql/contracts';
import { monotonicNow } from '../host/monotonic';
import type * as Crypto from 'node:crypto';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Agent, Server, createServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { gzipSync } from 'node:zlib';
import { newSessionId } from '../../../../test/support/fixtures';
import { TRUST_DOMAIN, createTestPki, createWorkerCert } from '../../../../test/support/test-plane';
import { closedWithin, startTlsTestServer, workerPem } from '../../../../test/support/tls-test-server';
import {
  INGRESS_RESPONSE_CAP_BYTES,
  IngressCallError,
  WorkerIngressHttpsClient,
  WorkerTlsCredentials,
} from './worker-ingress-https.client';

type Handler = (req: IncomingMessage, res: ServerResponse, body: Buffer) => void;

const session = (over: Record<string, unknown> = {}) => ({
  workerId: 'worker-a',
  sessionId: 'x',
  generation: 1,
  version: 1,
  status: 'online',
  leaseExpiresAt: new Date().toISOString(),
  maxConcurrentRuns: 1,
  availableSlots: 1,
  ...over,
});
const json = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) => {
  const bytes = Buffer.from(JSON.stringify(body));
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': String(bytes.length),
    ...headers,
  });
  res.end(bytes);
};
const hb = { generation: 1, expectedVersion: 0, availableSlots: 1 };

/** Counts per resource type, e.g. { TLSWrap: 2, Timeout: 1 }. */
function resources(): Map<string, number> {
  const counts = new Map<string, number>();
  for (const r of process.getActiveResourcesInfo()) counts.set(r, (counts.get(r) ?? 0) + 1);
  return counts;
}

describe('WorkerIngressHttpsClient against a real TLS 1.3 server', () => {
  let pki: Awaited<ReturnType<typeof createTestPki>>;
  let server: Server;
  let origin: string;
  let handler: Handler;
  let requests: Array<{ url: string; headers: IncomingMessage['headers']; body: Buffer }>;
  let connections: TLSSocket[];
  let credentials: WorkerTlsCredentials;
  let client: WorkerIngressHttpsClient;

  const newClient = (over: Partial<ConstructorParameters<typeof WorkerIngressHttpsClient>[0]> = {}) =>
    new WorkerIngressHttpsClient({
      origins: [origin],
      workerId: 'worker-a',
      credentials: () => credentials,
      timeoutMs: 5000,
      ...over,
    });
  const expectCallError = async (promise: Promise<unknown>, expected: Partial<IngressCallError>) => {
    const error = await promise.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(IngressCallError);
    expect(error).toMatchObject(expected);
    return error as IngressCallError;
  };

  beforeAll(async () => {
    pki = await createTestPki(['worker-a']);
    credentials = workerPem(pki, 'worker-a');
    ({ server, origin } = await startTlsTestServer(pki, (req, res, body) => {
      requests.push({ url: req.url ?? '', headers: req.headers, body });
      handler(req, res, body);
    }));
    server.on('secureConnection', (socket: TLSSocket) => connections.push(socket));
  });

  beforeEach(() => {
    requests = [];
    connections = [];
    handler = (_req, res) => json(res, 200, session());
    client = newClient();
  });
  afterEach(async () => {
    await client.close();
    // Wait for the server side of every connection to close too, so tests do not see each other's sockets.
    await closedWithin(connections, 3000);
  });
  afterAll(async () => {
    server.closeAllConnections();
    server.close();
    await once(server, 'close');
    pki.remove();
  });

  it('reuses one keep-alive TLS 1.3 socket for every call, sends no SNI to an IP origin, and posts JSON to the ingress path', async () => {
    const s = newSessionId();
    for (let i = 0; i < 3; i++)
      await expect(client.call('heartbeat', s, hb)).resolves.toMatchObject({ version: 1 });
    expect(connections).toHaveLength(1);
    expect(connections[0]!.getProtocol()).toBe('TLSv1.3');
    expect(connections[0]!.servername).toBeFalsy();
    expect(connections[0]!.getPeerCertificate().subjectaltname).toBe(
      `URI:spiffe://${TRUST_DOMAIN}/worker/worker-a`,
    );
    expect(requests.map((r) => r.url)).toEqual(
      Array(3).fill(`/api/v3/worker-ingress/workers/worker-a/sessions/${s}/heartbeat`),
    );
    expect(requests[0]!.headers).toMatchObject({
      'content-type': 'application/json',
      'accept-encoding': 'identity',
    });
    expect(JSON.parse(requests[0]!.body.toString())).toEqual(hb);
  });

  it('keeps one socket even when calls overlap (maxSockets = 1)', async () => {
    const s = newSessionId();
    await Promise.all([
      client.call('heartbeat', s, hb),
      client.call('heartbeat', s, hb),
      client.call('drain', s, hb),
    ]);
    expect(connections).toHaveLength(1);
    expect(requests).toHaveLength(3);
  });

  it('leaves no listener on its kept-alive socket after calls that waited for it (ADR 0049: they used to pile up, each holding its call)', async () => {
    const created = jest.spyOn(Agent.prototype, 'createConnection');
    try {
      const s = newSessionId();
      await Promise.all(Array.from({ length: 8 }, () => client.call('heartbeat', s, hb)));
      expect(connections).toHaveLength(1);
      const socket = created.mock.results[0]!.value as TLSSocket;
      expect(socket.listenerCount('secureConnect')).toBe(0);
    } finally {
      created.mockRestore();
    }
  });

  it('a call that waited for the socket is not held to the connect timeout once it has it (two origins: each has one)', async () => {
    // Two origins: each gets a connect timeout, a share of the call's 2 s. The first call's answer is
    // sent at once; the second, which got the socket when the first freed it, answers after that share.
    const twoOrigins = newClient({ origins: [origin, 'https://127.0.0.1:1'], timeoutMs: 2000 });
    const held: ServerResponse[] = [];
    handler = (_req, res) => (requests.length === 1 ? json(res, 200, session()) : held.push(res));
    try {
      const s = newSessionId();
      const calls = [twoOrigins.call('heartbeat', s, hb), twoOrigins.call('heartbeat', s, hb)];
      await expect(calls[0]).resolves.toMatchObject({ version: 1 });
      while (held.length === 0) await new Promise((resolve) => setTimeout(resolve, 10));
      await new Promise((resolve) => setTimeout(resolve, 1300)); // past its 1 s connect share
      json(held[0]!, 200, session());
      await expect(calls[1]).resolves.toMatchObject({ version: 1 });
      expect(requests).toHaveLength(2);
    } finally {
      await twoOrigins.close();
    }
  });

  it('sends SNI for a DNS origin', async () => {
    const port = new URL(origin).port;
    const dns = newClient({ origins: [`https://localhost:${port}`] });
    try {
      await dns.call('heartbeat', newSessionId(), hb);
      expect(connections[0]!.servername).toBe('localhost');
    } finally {
      await dns.close();
    }
  });

  it('refuses a request body over the route limit before sending anything (4 KiB; register 20 KiB)', async () => {
    const s = newSessionId();
    await expectCallError(client.call('heartbeat', s, { ...hb, pad: 'x'.repeat(4096) }), {
      status: 0,
      code: 'request_too_large',
    });
    await expectCallError(client.call('register', s, { pad: 'x'.repeat(20 * 1024) }), {
      status: 0,
      code: 'request_too_large',
    });
    expect(requests).toHaveLength(0);
    expect(connections).toHaveLength(0);
    await expect(client.call('register', s, { pad: 'x'.repeat(19 * 1024) })).resolves.toBeDefined();
    expect(requests).toHaveLength(1);
  });

  it('calls only the known ingress actions with a UUIDv7 session id', async () => {
    await expectCallError(client.call('explode' as 'heartbeat', newSessionId(), hb), {
      code: 'unknown_action',
    });
    await expectCallError(client.call('heartbeat', '../../admin', hb), { code: 'invalid_request' });
    expect(requests).toHaveLength(0);
  });

  it('turns a non-200 answer into an IngressCallError with status, code and reason, and keeps the socket', async () => {
    handler = (_req, res) =>
      json(res, 409, {
        code: 'worker_session_fenced',
        message: 'session replaced',
        reason: 'session_replaced',
      });
    const error = await expectCallError(client.call('heartbeat', newSessionId(), hb), {
      status: 409,
      code: 'worker_session_fenced',
      reason: 'session_replaced',
    });
    expect(error.fenced).toBe(true);
    handler = (_req, res) => json(res, 503, { error: 'no' });
    const other = await expectCallError(client.call('heartbeat', newSessionId(), hb), {
      status: 503,
      code: 'unexpected_status',
    });
    expect(other.fenced).toBe(false);
    expect(connections).toHaveLength(1);
  });

  it('refuses a compressed answer', async () => {
    handler = (_req, res) => {
      const gz = gzipSync(JSON.stringify(session()));
      res.writeHead(200, {
        'content-type': 'application/json',
        'content-encoding': 'gzip',
        'content-length': String(gz.length),
      });
      res.end(gz);
    };
    await expectCallError(client.call('heartbeat', newSessionId(), hb), {
      status: 200,
      code: 'compressed_response',
    });
  });

  it('refuses a non-JSON answer, even on 200', async () => {
    handler = (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end('<html>hello</html>');
    };
    await expectCallError(client.call('heartbeat', newSessionId(), hb), { status: 200, code: 'not_json' });
    handler = (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"version":');
    };
    await expectCallError(client.call('heartbeat', newSessionId(), hb), {
      status: 200,
      code: 'invalid_json',
    });
  });

  it('refuses a redirect without following it', async () => {
    handler = (_req, res) => {
      res.writeHead(307, {
        location: 'https://evil.example/',
        'content-type': 'application/json',
        'content-length': '2',
      });
      res.end('{}');
    };
    await expectCallError(client.call('heartbeat', newSessionId(), hb), { status: 307, code: 'redirect' });
    expect(requests).toHaveLength(1);
  });

  it('aborts an answer over 128 KiB, declared or streamed', async () => {
    const big = JSON.stringify({ pad: 'x'.repeat(INGRESS_RESPONSE_CAP_BYTES) });
    handler = (_req, res) => {
      res.writeHead(200, {
        'content-type': 'application/json',
        'content-length': String(Buffer.byteLength(big)),
      });
      res.end(big);
    };
    await expectCallError(client.call('heartbeat', newSessionId(), hb), { code: 'response_too_large' });
    handler = (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' }); // chunked: no length to check up front
      res.write(big.slice(0, 64 * 1024));
      res.write(big.slice(64 * 1024, 128 * 1024));
      res.end(big.slice(128 * 1024));
    };
    await expectCallError(client.call('heartbeat', newSessionId(), hb), { code: 'response_too_large' });
    // A smaller per-call cap applies too; one just under the cap passes.
    handler = (_req, res) => json(res, 200, { pad: 'x'.repeat(1000) });
    await expectCallError(client.call('heartbeat', newSessionId(), hb, { maxResponseBytes: 512 }), {
      code: 'response_too_large',
    });
    handler = (_req, res) => json(res, 200, { pad: 'x'.repeat(INGRESS_RESPONSE_CAP_BYTES - 100) });
    await expect(client.call('heartbeat', newSessionId(), hb)).resolves.toBeDefined();
  });

  it('reads a 200 answer from its exact bytes with the given parser; what it refuses is invalid_response', async () => {
    // Duplicate keys are invisible to JSON.parse; a contract's strict parser sees the bytes and refuses them.
    handler = (_req, res) => {
      const raw = '{"status":"idle","status":"offered"}';
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(raw.length) });
      res.end(raw);
    };
    const strict = (bytes: Buffer) => parseStrictJson(bytes);
    await expectCallError(client.call('offers', newSessionId(), hb, { parse: strict }), {
      status: 200,
      code: 'invalid_response',
    });
    handler = (_req, res) => json(res, 200, { status: 'idle' });
    await expect(client.call('offers', newSessionId(), hb, { parse: (b) => b.length })).resolves.toBe(17);
    // An error answer is still read as an error, whatever the parser.
    handler = (_req, res) =>
      json(res, 409, { code: 'worker_lease_fenced', message: 'no', reason: 'lease_expired' });
    await expectCallError(client.call('offers', newSessionId(), hb, { parse: strict }), {
      status: 409,
      reason: 'lease_expired',
    });
  });

  it('reads the control plane clock from the Date header of 200 answers: lease expiries land on the monotonic clock', async () => {
    const hourAhead = Date.now() + 3_600_000;
    handler = (_req, res) => {
      res.setHeader('date', new Date(hourAhead).toUTCString());
      json(res, 200, session());
    };
    // No answer yet: the control plane is taken to keep this machine's wall time.
    expect(client.toLocalTime(Date.now() + 30_000) - monotonicNow()).toBeGreaterThan(29_900);
    await client.call('heartbeat', newSessionId(), hb);
    // A lease that the control plane says ends 30 s after its now ends 29..30 s after ours.
    const term = client.toLocalTime(hourAhead + 30_000) - monotonicNow();
    expect(term).toBeGreaterThan(28_000);
    expect(term).toBeLessThanOrEqual(30_000);
    // An error answer does not move it.
    handler = (_req, res) => {
      res.setHeader('date', new Date(0).toUTCString());
      json(res, 409, { code: 'worker_session_fenced', message: 'no', reason: 'session_replaced' });
    };
    await expectCallError(client.call('heartbeat', newSessionId(), hb), { status: 409 });
    expect(client.toLocalTime(hourAhead + 30_000) - monotonicNow()).toBeGreaterThan(28_000);
  });

  it('refuses an answer shorter than its content-length', async () => {
    handler = (req, res) => {
      // Bypass the HTTP writer: declare 100 bytes, send 2, close.
      void res;
      req.socket.end('HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{}');
    };
    await expectCallError(client.call('heartbeat', newSessionId(), hb), {
      status: 200,
      code: 'length_mismatch',
    });
  });

  it('honours an AbortSignal and a per-call timeout', async () => {
    handler = () => undefined; // never answers
    const controller = new AbortController();
    const call = client.call('heartbeat', newSessionId(), hb, { signal: controller.signal });
    await once(server, 'request');
    controller.abort();
    await expectCallError(call, { code: 'aborted' });
    await expectCallError(client.call('heartbeat', newSessionId(), hb, { timeoutMs: 200 }), {
      code: 'timeout',
    });
  });

  it('re-reads credentials on every call: a rotated certificate gets a new agent and the old socket is closed', async () => {
    let reads = 0;
    let current = credentials;
    const rotating = newClient({
      credentials: () => {
        reads++;
        return current;
      },
    });
    try {
      const s = newSessionId();
      await rotating.call('heartbeat', s, hb);
      await rotating.call('heartbeat', s, hb);
      expect(reads).toBe(2);
      expect(connections).toHaveLength(1);
      const first = connections[0]!;
      const firstSerial = first.getPeerCertificate().serialNumber;

      const rotated = await createWorkerCert(pki.caPair(), {
        workerId: 'worker-a',
        trustDomain: TRUST_DOMAIN,
      });
      current = { ...credentials, certPem: rotated.certPem, keyPem: rotated.keyPem };
      await rotating.call('heartbeat', s, hb);
      expect(connections).toHaveLength(2);
      expect(connections[1]!.getPeerCertificate().serialNumber).not.toBe(firstSerial);
      await closedWithin([first], 3000); // the old agent was destroyed
      await rotating.call('heartbeat', s, hb);
      expect(connections).toHaveLength(2); // and the new one is reused
    } finally {
      await rotating.close();
    }
  });

  it('hashes the credentials only when the provider hands over other buffers than last time', async () => {
    const copy = (): WorkerTlsCredentials => ({
      caPem: Buffer.from(credentials.caPem),
      certPem: Buffer.from(credentials.certPem),
      keyPem: Buffer.from(credentials.keyPem),
    });
    let current = copy();
    // The module object the client calls into (an `import *` would be a copy of it).
    const hashing = jest.spyOn(jest.requireActual<typeof Crypto>('node:crypto'), 'createHash');
    const cached = newClient({ credentials: () => current });
    try {
      const s = newSessionId();
      await cached.call('heartbeat', s, hb);
      await cached.call('heartbeat', s, hb);
      expect(hashing).toHaveBeenCalledTimes(1);
      current = copy(); // the same bytes in new buffers: hashed again, same fingerprint, same agent
      await cached.call('heartbeat', s, hb);
      await cached.call('heartbeat', s, hb);
      expect(hashing).toHaveBeenCalledTimes(2);
      for (const part of ['certPem', 'keyPem', 'caPem'] as const) {
        current = { ...current, [part]: Buffer.from(current[part]) }; // one part in a new buffer
        await cached.call('heartbeat', s, hb);
      }
      expect(hashing).toHaveBeenCalledTimes(5);
      expect(connections).toHaveLength(1);
    } finally {
      hashing.mockRestore();
      await cached.close();
    }
  });

  it('fails a call whose credentials cannot be read, without connecting', async () => {
    const broken = newClient({
      credentials: () => {
        throw Object.assign(new Error('ENOENT: no such file'), { code: 'ENOENT' });
      },
    });
    await expectCallError(broken.call('heartbeat', newSessionId(), hb), {
      code: 'credentials_unavailable',
      reason: 'ENOENT',
    });
    expect(connections).toHaveLength(0);
    await broken.close();
  });

  it('fails on credentials that are not usable PEM, without connecting', async () => {
    const garbage = newClient({ credentials: () => ({ ...credentials, keyPem: 'not a key' }) });
    await expectCallError(garbage.call('heartbeat', newSessionId(), hb), {
      status: 0,
      code: 'credentials_invalid',
    });
    expect(connections).toHaveLength(0);
    await garbage.close();
  });

  it('will not speak below TLS 1.3', async () => {
    const old = createServer({
      key: readFileSync(pki.serverKeyPath),
      cert: readFileSync(pki.serverCertPath),
      maxVersion: 'TLSv1.2',
    });
    old.listen(0, '127.0.0.1');
    await once(old, 'listening');
    const tls12 = newClient({ origins: [`https://127.0.0.1:${(old.address() as AddressInfo).port}`] });
    try {
      await expectCallError(tls12.call('heartbeat', newSessionId(), hb), {
        status: 0,
        code: 'transport_error',
      });
    } finally {
      await tls12.close();
      old.closeAllConnections();
      old.close();
      await once(old, 'close');
    }
  });

  it('close() releases the agent: no socket is left and later calls fail', async () => {
    await new Promise((resolve) => setImmediate(resolve));
    const before = resources();
    await client.call('heartbeat', newSessionId(), hb);
    expect(connections).toHaveLength(1);
    await client.close();
    await closedWithin(connections, 3000);
    await new Promise((resolve) => setImmediate(resolve));
    const after = resources();
    for (const type of ['TLSWrap', 'TCPSocketWrap', 'TCPWRAP'])
      expect(after.get(type) ?? 0).toBeLessThanOrEqual(before.get(type) ?? 0);
    await expectCallError(client.call('heartbeat', newSessionId(), hb), { code: 'client_closed' });
  });

  it('refuses an origin that is not https://host[:port]', () => {
    expect(() => newClient({ origins: ['http://127.0.0.1:1'] })).toThrow(TypeError);
    expect(() => newClient({ origins: ['https://127.0.0.1:1/api?x=1'] })).toThrow(TypeError);
  });
});
