import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { presentsTrustedCertificate } from './edge';

/** The ingress's bounds on connections that present no trusted client certificate (issue 27 item 8). */
export interface UncredentialedBounds {
  /** Each request, head and body, must arrive within this of the connection's start or its last answer. */
  readonly requestTimeoutMs: number;
  /** Connections per source address: handshakes in progress, and connections without a trusted certificate. */
  readonly perAddress: number;
  /** The same, for the listener as a whole. */
  readonly total: number;
}

/** Counts per address; an address leaves the map at zero, so it holds only addresses with connections. */
class AddressCounts {
  private readonly counts = new Map<string, number>();
  private total = 0;

  constructor(private readonly bounds: UncredentialedBounds) {}

  /** Counts one more for `address`, or answers false when the address or the listener is full. */
  admit(address: string): boolean {
    const n = this.counts.get(address) ?? 0;
    if (n >= this.bounds.perAddress || this.total >= this.bounds.total) return false;
    this.counts.set(address, n + 1);
    this.total += 1;
    return true;
  }

  release(address: string): void {
    const n = this.counts.get(address) ?? 0;
    if (n <= 1) this.counts.delete(address);
    else this.counts.set(address, n - 1);
    this.total -= 1;
  }
}

/**
 * The ingress serves one route without a client certificate (enrollment, ADR 0045 §2), so anyone can
 * open connections to it. Bounded here, before any HTTP byte is read where possible (ADR 0045, issue
 * 27 item 8): a raw connection is refused at once when its address already has `perAddress`
 * handshakes in progress (or the listener `total`); a handshake that ends without a trusted
 * certificate is closed at once when its address already holds `perAddress` such connections (or
 * the listener `total`); and such a connection must deliver each request in full within
 * `requestTimeoutMs` of its start or of its previous answer, else it is closed. A worker's
 * connection, with its certificate, is counted only while its handshake runs: a full cap never
 * refuses a worker that completes its handshake. The handshake itself is bounded by the server's
 * `handshakeTimeout`. `server`: the ingress's HTTPS server.
 */
export function boundUncredentialedConnections(server: Server, bounds: UncredentialedBounds): void {
  const handshaking = new AddressCounts(bounds);
  const uncredentialed = new AddressCounts(bounds);
  /** A raw connection still in its handshake, by `address|port` (the TLS socket shows the same pair). */
  const pending = new Map<string, () => void>();
  /** The uncredentialed connections' current deadlines: the client owes its request (or a next one). */
  const deadlines = new WeakMap<Socket, NodeJS.Timeout>();
  const rearms = new WeakMap<Socket, () => void>();
  server.prependListener('connection', (raw: Socket) => {
    const address = raw.remoteAddress ?? '';
    if (!handshaking.admit(address)) {
      raw.destroy();
      return;
    }
    const key = `${address}|${raw.remotePort}`;
    let counted = true;
    const done = () => {
      if (!counted) return;
      counted = false;
      handshaking.release(address);
      pending.delete(key);
    };
    pending.set(key, done);
    raw.once('close', done);
  });
  server.prependListener('secureConnection', (socket: TLSSocket) => {
    const address = socket.remoteAddress ?? '';
    pending.get(`${address}|${socket.remotePort}`)?.();
    if (presentsTrustedCertificate(socket)) return;
    if (!uncredentialed.admit(address)) {
      socket.destroy();
      return;
    }
    const rearm = () => {
      clearTimeout(deadlines.get(socket));
      deadlines.set(socket, setTimeout(() => socket.destroy(), bounds.requestTimeoutMs).unref());
    };
    socket.once('close', () => {
      clearTimeout(deadlines.get(socket));
      uncredentialed.release(address);
    });
    rearm();
    rearms.set(socket, rearm);
  });
  // Before the framework's listener: the request's body is read (or its answer sent) after this.
  server.prependListener('request', (req: IncomingMessage, res: ServerResponse) => {
    const rearm = rearms.get(req.socket);
    if (!rearm) return;
    // The body read in full stops the clock; an answer (sent with or without reading it) restarts it.
    // (Node drains an unread body after the answer: that end must not stop the next deadline.)
    req.once('end', () => {
      if (!res.writableEnded) clearTimeout(deadlines.get(req.socket));
    });
    res.once('finish', rearm);
  });
}
