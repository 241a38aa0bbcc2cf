import { AddressInfo, Server, Socket, connect, createServer } from 'node:net';

/**
 * A TCP relay in front of one control-plane ingress listener that can lose an answer: TLS passes
 * through untouched (the worker still talks mTLS to the replica), and after `cutNextAnswer()` the
 * first bytes the replica sends on a connection that was already open are not passed on — the
 * worker's connection is dropped instead. The replica has read the request and committed by then:
 * exactly a replica dying between its commit and its answer.
 */
export class AnswerCutter {
  /** Answers lost so far. */
  cuts = 0;
  /** Connections the relay accepted. */
  connections = 0;
  private readonly open = new Set<Socket>();
  /** Connections open when the cut was asked for: past their TLS handshake, carrying calls. */
  private eligible = new Set<Socket>();
  private down = false;

  private constructor(
    private readonly server: Server,
    private readonly targetPort: number,
  ) {}

  /** A relay to `https://127.0.0.1:<port>` of `targetOrigin`; `origin` is the same replica through it. */
  static async start(targetOrigin: string): Promise<AnswerCutter> {
    const server = createServer();
    const relay = new AnswerCutter(server, Number(new URL(targetOrigin).port));
    server.on('connection', (client) => relay.accept(client));
    server.listen(0, '127.0.0.1');
    await new Promise<void>((resolve) => server.once('listening', resolve));
    return relay;
  }

  get origin(): string {
    return `https://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  /** The next answer on a connection open now is lost. */
  cutNextAnswer(): void {
    this.eligible = new Set(this.open);
  }

  /**
   * `true`: the replica is gone as the worker sees it — open connections are reset and new ones are
   * closed at once; `false`: the relay passes bytes again.
   */
  refuse(down: boolean): void {
    this.down = down;
    if (down) for (const socket of this.open) socket.destroy();
  }

  async close(): Promise<void> {
    for (const socket of this.open) socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private accept(client: Socket): void {
    if (this.down) {
      client.on('error', () => undefined);
      client.destroy();
      return;
    }
    this.connections++;
    const upstream = connect(this.targetPort, '127.0.0.1');
    const close = () => {
      client.destroy();
      upstream.destroy();
      this.open.delete(client);
    };
    for (const socket of [client, upstream]) {
      socket.on('error', () => undefined);
      socket.on('close', close);
    }
    this.open.add(client);
    client.pipe(upstream);
    upstream.on('data', (chunk: Buffer) => {
      if (this.eligible.has(client)) {
        this.eligible.clear();
        this.cuts++;
        return close();
      }
      client.write(chunk);
    });
  }
}
