import { X509Certificate } from 'node:crypto';
import { once } from 'node:events';
import { promises as fs } from 'node:fs';
import * as https from 'node:https';
import { AddressInfo } from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { TLSSocket } from 'node:tls';
import { PemPair, createCa, createWorkerCert, ensureDevPki } from '../../apps/control-plane/src/pki';

// R-ID-1 / R-ID-6: a plain node:https listener with the worker ingress's TLS settings, fed by the dev
// PKI, that rejects unauthorized handshakes: what TLS itself refuses. The ingress lets those handshakes
// through to its gate, which answers 401 to all but enrollment (ADR 0045 §2, ingress-certificate-gate).
// Every case takes well under 100 ms; a regression that lets a handshake through must not hang for 60 s.
jest.setTimeout(10_000);

const TRUST_DOMAIN = 'ql.test';
const WORKER_ID = 'worker-1';
const WORKER_URI = `URI:spiffe://${TRUST_DOMAIN}/worker/${WORKER_ID}`;

type Outcome =
  { kind: 'response'; status: number; body: string } | { kind: 'error'; code: string | undefined };
interface SeenRequest {
  peer: X509Certificate | undefined;
  protocol: string | null;
  reused: boolean;
}
interface ServerTlsFailure {
  code: string | undefined;
  authorizationError: string | null;
}

describe('worker ingress TLS handshake with the dev PKI', () => {
  let tmp: string;
  let server: https.Server;
  let port: number;
  let caPem: string;
  let worker: PemPair;
  let ca: PemPair;
  const seen: SeenRequest[] = [];
  const agents: https.Agent[] = [];

  beforeAll(async () => {
    tmp = await fs.mkdtemp(path.join(os.tmpdir(), 'ql-tls-e2e-'));
    const paths = await ensureDevPki(tmp, { trustDomain: TRUST_DOMAIN, workers: [WORKER_ID] });
    const read = (p: string): Promise<string> => fs.readFile(p, 'utf8');
    caPem = await read(paths.caCertPath);
    ca = { certPem: caPem, keyPem: await read(paths.caKeyPath) };
    worker = {
      certPem: await read(paths.workers[WORKER_ID]!.certPath),
      keyPem: await read(paths.workers[WORKER_ID]!.keyPath),
    };

    server = https.createServer(
      {
        key: await read(paths.serverKeyPath),
        cert: await read(paths.serverCertPath),
        ca: caPem,
        requestCert: true,
        rejectUnauthorized: true,
        minVersion: 'TLSv1.3',
      },
      (req, res) => {
        const socket = req.socket as TLSSocket;
        const peer = socket.getPeerX509Certificate();
        seen.push({ peer, protocol: socket.getProtocol(), reused: socket.isSessionReused() });
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ subjectAltName: peer?.subjectAltName ?? null }));
      },
    );
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    port = (server.address() as AddressInfo).port;
  });

  afterAll(async () => {
    agents.forEach((agent) => agent.destroy());
    if (server?.listening) {
      const closed = once(server, 'close');
      server.close();
      server.closeAllConnections();
      await closed;
    }
    if (tmp) await fs.rm(tmp, { recursive: true, force: true });
  });

  /** Each client gets its own agent (own TLS session cache), destroyed in afterAll. */
  function client(tls: Pick<https.AgentOptions, 'cert' | 'key' | 'maxVersion'> = {}): https.Agent {
    const agent = new https.Agent({ ca: caPem, keepAlive: false, ...tls });
    agents.push(agent);
    return agent;
  }

  function get(agent: https.Agent): Promise<Outcome> {
    return new Promise((resolve) => {
      // Host is an IP, so the client also checks the server certificate's IP SAN against the dev CA.
      const req = https.get({ host: '127.0.0.1', port, path: '/', agent }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () =>
          resolve({
            kind: 'response',
            status: res.statusCode ?? 0,
            body: Buffer.concat(chunks).toString('utf8'),
          }),
        );
      });
      req.on('error', (err: NodeJS.ErrnoException) => resolve({ kind: 'error', code: err.code }));
    });
  }

  /** Must be called before the request: resolves with the server-side reason the handshake failed. */
  async function nextServerTlsFailure(): Promise<ServerTlsFailure> {
    const [err, socket] = (await once(server, 'tlsClientError')) as [NodeJS.ErrnoException, TLSSocket];
    // @types/node types authorizationError as Error, but at runtime it is an OpenSSL code string.
    const reason: unknown = socket.authorizationError;
    return { code: err.code, authorizationError: reason == null ? null : String(reason) };
  }

  async function expectRejected(agent: https.Agent): Promise<ServerTlsFailure> {
    const before = seen.length;
    const failure = nextServerTlsFailure();
    const outcome = await get(agent);
    expect(outcome.kind).toBe('error'); // never a response, not even a 4xx
    expect(seen).toHaveLength(before);
    return failure;
  }

  it('accepts the dev worker certificate over TLS 1.3 and exposes its SPIFFE id to the server', async () => {
    const outcome = await get(client({ cert: worker.certPem, key: worker.keyPem }));

    expect(outcome).toEqual({
      kind: 'response',
      status: 200,
      body: JSON.stringify({ subjectAltName: WORKER_URI }),
    });
    const last = seen.at(-1)!;
    expect(last.protocol).toBe('TLSv1.3');
    expect(last.peer?.subjectAltName).toBe(WORKER_URI);
    expect(last.peer?.fingerprint256).toBe(new X509Certificate(worker.certPem).fingerprint256);
  });

  it('fails the handshake when the client sends no certificate', async () => {
    const failure = await expectRejected(client());
    expect(failure.code).toBe('ERR_SSL_PEER_DID_NOT_RETURN_A_CERTIFICATE');
  });

  it('fails the handshake for a worker certificate from a different CA', async () => {
    const otherCa = await createCa({ commonName: 'Someone Else CA' });
    const stranger = await createWorkerCert(otherCa, { workerId: WORKER_ID, trustDomain: TRUST_DOMAIN });

    const failure = await expectRejected(client({ cert: stranger.certPem, key: stranger.keyPem }));
    expect(failure.authorizationError).toBe('UNABLE_TO_VERIFY_LEAF_SIGNATURE');
  });

  it('fails the handshake for a client limited to TLS 1.2', async () => {
    const failure = await expectRejected(
      client({ cert: worker.certPem, key: worker.keyPem, maxVersion: 'TLSv1.2' }),
    );
    expect(failure.code).toBe('ERR_SSL_UNSUPPORTED_PROTOCOL');
  });

  it('fails the handshake for an expired worker certificate', async () => {
    const expired = await createWorkerCert(ca, {
      workerId: WORKER_ID,
      trustDomain: TRUST_DOMAIN,
      notBefore: new Date('2020-01-01T00:00:00Z'),
      notAfter: new Date('2020-01-02T00:00:00Z'),
    });
    const failure = await expectRejected(client({ cert: expired.certPem, key: expired.keyPem }));
    expect(failure.authorizationError).toBe('CERT_HAS_EXPIRED');
  });

  it('fails the handshake for a certificate without the clientAuth EKU (OpenSSL ssl_client purpose)', async () => {
    const serverOnly = await createWorkerCert(ca, {
      workerId: WORKER_ID,
      trustDomain: TRUST_DOMAIN,
      clientAuth: false,
    });
    const failure = await expectRejected(client({ cert: serverOnly.certPem, key: serverOnly.keyPem }));
    expect(failure.authorizationError).toBe('INVALID_PURPOSE');
  });

  // TLS alone does not enforce R-ID-2: these reach the handler, so the principal guard must reject them.
  it('lets a CA certificate used as a leaf and a certificate without URI SAN through the handshake', async () => {
    const caLeaf = await createWorkerCert(ca, { workerId: WORKER_ID, trustDomain: TRUST_DOMAIN, isCa: true });
    const noUri = await createWorkerCert(ca, { workerId: WORKER_ID, trustDomain: TRUST_DOMAIN, uris: [] });

    const caLeafOutcome = await get(client({ cert: caLeaf.certPem, key: caLeaf.keyPem }));
    expect(caLeafOutcome).toMatchObject({ kind: 'response', status: 200 });
    expect(seen.at(-1)!.peer?.ca).toBe(true);

    const noUriOutcome = await get(client({ cert: noUri.certPem, key: noUri.keyPem }));
    expect(noUriOutcome).toMatchObject({ kind: 'response', status: 200 });
    expect(seen.at(-1)!.peer?.subjectAltName).toBeUndefined();
  });

  it('still exposes the peer certificate on a resumed TLS 1.3 session', async () => {
    const agent = client({ cert: worker.certPem, key: worker.keyPem });
    await get(agent); // full handshake; the agent caches the session ticket
    const outcome = await get(agent); // new connection (keepAlive off) resuming that session

    expect(outcome).toMatchObject({ kind: 'response', status: 200 });
    const last = seen.at(-1)!;
    expect(last.reused).toBe(true);
    expect(last.peer?.subjectAltName).toBe(WORKER_URI);
  });
});
