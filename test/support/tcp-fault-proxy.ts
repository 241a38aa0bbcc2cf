import { AddressInfo, Server, Socket, connect, createServer } from 'node:net';

/**
 * A TCP proxy in front of the control plane's ingress listener (TLS passes through untouched), so
 * one worker's path can go bad while the others' stays good:
 *   forward          bytes pass both ways (the normal case)
 *   swallow()        from now on nothing passes either way; connections stay open (a path that
 *                    drops packets: calls hang until their own timeout)
 *   delayAnswers(ms) bytes from the control plane reach the worker `ms` late (order kept); requests
 *                    pass at once — the answer is slow on its way back
 *   cut()            every open connection is reset now; new ones pass (a lost connection: a Wi-Fi
 *                    drop, a NAT entry gone)
 */
export class TcpFaultProxy {
  private swallowing = false;
  private answerDelayMs = 0;
  private readonly sockets = new Set<Socket>();
  private readonly server: Server;
  private port = 0;

  private constructor(
    private readonly targetHost: string,
    private readonly targetPort: number,
  ) {
    this.server = createServer((socket) => this.accept(socket));
  }

  /** A proxy for `origin` (`https://host:port`); `url` is the same listener through the proxy. */
  static async start(origin: string): Promise<TcpFaultProxy> {
    const target = new URL(origin);
    const proxy = new TcpFaultProxy(target.hostname, Number(target.port));
    await new Promise<void>((resolve) => proxy.server.listen(0, '127.0.0.1', resolve));
    proxy.port = (proxy.server.address() as AddressInfo).port;
    return proxy;
  }

  get url(): string {
    return `https://127.0.0.1:${this.port}`;
  }

  swallow(): void {
    this.swallowing = true;
  }

  /** Resets every connection open now; the next ones pass. Answers how many were cut. */
  cut(): number {
    const open = [...this.sockets];
    for (const s of open) s.resetAndDestroy();
    return open.length;
  }

  delayAnswers(ms: number): void {
    this.answerDelayMs = ms;
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private accept(client: Socket): void {
    const upstream = connect(this.targetPort, this.targetHost);
    for (const s of [client, upstream]) {
      this.sockets.add(s);
      s.on('close', () => this.sockets.delete(s));
      s.on('error', () => undefined);
    }
    const end = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('close', end);
    upstream.on('close', end);
    client.on('data', (data: Buffer) => {
      if (!this.swallowing) upstream.write(data);
    });
    upstream.on('data', (data: Buffer) => {
      if (this.swallowing) return;
      if (this.answerDelayMs === 0) client.write(data);
      else setTimeout(() => client.writable && client.write(data), this.answerDelayMs).unref();
    });
  }
}
