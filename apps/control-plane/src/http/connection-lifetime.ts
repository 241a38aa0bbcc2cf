import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

interface Connection {
  expired: boolean;
  readonly answering: Set<ServerResponse>;
}

/**
 * Bounds how long one connection serves requests (QL_INGRESS_CONNECTION_MAX_MS, ADR 0033): TLS checks
 * a client certificate once, at the handshake, and a kept-alive connection could otherwise carry its
 * calls for as long as the client keeps it busy. Once a connection is `maxMs` old, the answers still
 * to be written say `Connection: close` (the client opens a new connection, no request is lost), and
 * it closes as soon as no answer is in flight — at once when idle. A request still in flight then has
 * `maxMs` more to finish, after which the connection is closed without its answer (issue 27 item 8: a
 * trickled body or a stalled request must not hold it for ever). The certificate's validity and
 * revocation are checked on every request anyway (`PrincipalStanding`); this bounds what rides on one
 * handshake. `event`: the server's connection event (`secureConnection` for TLS).
 */
export function boundConnectionLifetime(server: Server, event: string, maxMs: number): void {
  const connections = new WeakMap<Socket, Connection>();
  server.on(event, (socket: Socket) => {
    const connection: Connection = { expired: false, answering: new Set() };
    connections.set(socket, connection);
    let timer = setTimeout(() => {
      connection.expired = true;
      for (const res of connection.answering) if (!res.headersSent) res.setHeader('connection', 'close');
      closeWhenIdle(socket, connection);
      if (!socket.destroyed) timer = setTimeout(() => socket.destroy(), maxMs).unref();
    }, maxMs).unref();
    socket.once('close', () => clearTimeout(timer));
  });
  // Before the framework's own listener, which may answer at once.
  server.prependListener('request', (req: IncomingMessage, res: ServerResponse) => {
    const socket = req.socket;
    const connection = connections.get(socket);
    if (!connection) return;
    if (connection.expired) res.setHeader('connection', 'close');
    connection.answering.add(res);
    res.once('close', () => {
      connection.answering.delete(res);
      if (connection.expired) closeWhenIdle(socket, connection);
    });
  });
}

/** `destroySoon` ends our side once the writes are out (the edge makes it linger for the client's bytes). */
function closeWhenIdle(socket: Socket, connection: Connection): void {
  if (connection.answering.size === 0 && !socket.destroyed) socket.destroySoon();
}
