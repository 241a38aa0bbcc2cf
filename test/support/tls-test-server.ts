import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Server, createServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { TLSSocket } from 'node:tls';
import type { createTestPki } from './test-plane';

export type BodyHandler = (req: IncomingMessage, res: ServerResponse, body: Buffer) => void;

export interface TlsTestServer {
  readonly server: Server;
  /** `https://127.0.0.1:<port>` */
  readonly origin: string;
  /** Every TLS connection the server accepted, in order. */
  readonly connections: TLSSocket[];
}

/**
 * A real TLS 1.3 listener with the test PKI's server certificate that asks for a client certificate,
 * reads each request body whole and hands it to `onRequest`. Idle sockets are never closed by the
 * server, so a server-side 'close' can only come from the client.
 */
export async function startTlsTestServer(
  pki: Awaited<ReturnType<typeof createTestPki>>,
  onRequest: BodyHandler,
): Promise<TlsTestServer> {
  const connections: TLSSocket[] = [];
  const server = createServer(
    {
      key: readFileSync(pki.serverKeyPath),
      cert: readFileSync(pki.serverCertPath),
      ca: readFileSync(pki.caCertPath),
      requestCert: true,
      rejectUnauthorized: true,
      minVersion: 'TLSv1.3',
    },
    (req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => onRequest(req, res, Buffer.concat(chunks)));
    },
  );
  server.keepAliveTimeout = 0;
  server.on('secureConnection', (socket: TLSSocket) => connections.push(socket));
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return { server, origin: `https://127.0.0.1:${(server.address() as AddressInfo).port}`, connections };
}

/** The PEM files of one test worker, read once (the shape `WorkerTlsCredentials` wants). */
export function workerPem(pki: Awaited<ReturnType<typeof createTestPki>>, workerId: string) {
  return {
    caPem: readFileSync(pki.caCertPath),
    certPem: readFileSync(pki.workers[workerId]!.certPath),
    keyPem: readFileSync(pki.workers[workerId]!.keyPath),
  };
}

/** Awaits every socket's 'close' event, failing (not hanging) past a deadline. */
export async function closedWithin(sockets: readonly TLSSocket[], ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`a connection was still open after ${ms} ms`)), ms);
  });
  try {
    await Promise.race([
      Promise.all(sockets.filter((s) => !s.closed).map((s) => once(s, 'close'))),
      deadline,
    ]);
  } finally {
    clearTimeout(timer);
  }
}
