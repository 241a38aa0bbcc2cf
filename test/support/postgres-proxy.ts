import { AddressInfo, Server, Socket, connect, createServer } from 'node:net';

/**
 * A TCP proxy in front of the shared test PostgreSQL server, so one test can make "the database"
 * unreachable without touching the server other test files use:
 *   forward        pass bytes both ways (the normal case)
 *   shutting-down  answer every new connection the way a stopping server does (FATAL 57P03)
 *   blackhole      accept connections and never answer (a partitioned network)
 * `down()` stops listening (a new connection is refused) and drops every open one; `up()` forwards
 * again (listening on the same port).
 */
export class PostgresProxy {
  private mode: 'forward' | 'shutting-down' | 'blackhole' = 'forward';
  private readonly sockets = new Set<Socket>();
  private server: Server | undefined;
  private port = 0;

  private constructor(
    private readonly targetHost: string,
    private readonly targetPort: number,
  ) {}

  /** A proxy for the server of `databaseUrl`; `url` is the same database through the proxy. */
  static async start(databaseUrl: string): Promise<PostgresProxy & { readonly url: string }> {
    const target = new URL(databaseUrl);
    const proxy = new PostgresProxy(target.hostname, Number(target.port || 5432));
    await proxy.up();
    target.hostname = '127.0.0.1';
    target.port = String(proxy.port);
    return Object.assign(proxy, { url: target.toString() });
  }

  async up(): Promise<void> {
    this.mode = 'forward';
    if (this.server) return;
    const server = createServer((socket) => this.accept(socket));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.port, '127.0.0.1', () => resolve());
    });
    this.server = server;
    this.port = (server.address() as AddressInfo).port;
  }

  async down(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    this.dropConnections();
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  /** New connections get FATAL 57P03; the open ones are dropped, as a stopping server closes them. */
  shutDown(): void {
    this.mode = 'shutting-down';
    this.dropConnections();
  }

  /** New connections are accepted and never answered; the open ones are dropped. */
  blackhole(): void {
    this.mode = 'blackhole';
    this.dropConnections();
  }

  /** Resets every connection open through the proxy (the client sees its socket close). */
  dropConnections(): void {
    for (const socket of this.sockets) socket.destroy();
    this.sockets.clear();
  }

  private accept(client: Socket): void {
    this.track(client);
    if (this.mode === 'blackhole') return;
    if (this.mode === 'shutting-down') {
      // The startup packet arrives first; a stopping server answers it with an ErrorResponse.
      client.once('data', () => client.end(errorResponse('57P03', 'the database system is shutting down')));
      return;
    }
    const upstream = this.track(connect(this.targetPort, this.targetHost));
    client.pipe(upstream).pipe(client);
    const close = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('close', close);
    upstream.on('close', close);
  }

  private track(socket: Socket): Socket {
    this.sockets.add(socket);
    socket.on('error', () => undefined);
    socket.on('close', () => this.sockets.delete(socket));
    return socket;
  }
}

/** A PostgreSQL protocol ErrorResponse ('E'): severity, code and message fields. */
function errorResponse(code: string, message: string): Buffer {
  const fields = Buffer.from(`SFATAL\0VFATAL\0C${code}\0M${message}\0\0`, 'utf8');
  const header = Buffer.alloc(5);
  header.write('E', 0, 'ascii');
  header.writeInt32BE(fields.length + 4, 1);
  return Buffer.concat([header, fields]);
}
