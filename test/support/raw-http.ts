import { connect as netConnect, Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import type { PemPair } from '../../apps/control-plane/src/pki';

export interface RawResponse {
  readonly status: number;
  readonly headers: Record<string, string>;
  readonly body: unknown;
}

/**
 * One HTTP/1.1 client connection that sends bytes exactly as given (an HTTP client library would
 * normalise or refuse a malformed URL) and reads Content-Length framed responses.
 */
export class RawConnection {
  private buffer = Buffer.alloc(0);
  private ended = false;
  private failure: Error | null = null;
  private wake: () => void = () => undefined;

  private constructor(private readonly socket: Socket) {
    socket.on('data', (chunk: Buffer) => {
      this.buffer = Buffer.concat([this.buffer, chunk]);
      this.wake();
    });
    socket.on('end', () => {
      this.ended = true;
      this.wake();
    });
    socket.on('error', (error) => {
      this.failure = error;
      this.wake();
    });
  }

  /** Plain HTTP to `http://host:port`, or TLS (with client credentials, or none) to `https://host:port`. */
  static open(
    origin: string,
    tls?: { ca: Buffer; credentials: PemPair | null; localAddress?: string },
  ): Promise<RawConnection> {
    const { hostname, port } = new URL(origin);
    return new Promise((resolve, reject) => {
      const socket = tls
        ? tlsConnect({
            host: hostname,
            port: Number(port),
            ca: tls.ca,
            ...(tls.credentials ? { cert: tls.credentials.certPem, key: tls.credentials.keyPem } : {}),
            servername: 'localhost',
            ...(tls.localAddress ? { localAddress: tls.localAddress } : {}),
          })
        : netConnect(Number(port), hostname);
      socket.once('error', reject);
      socket.once(tls ? 'secureConnect' : 'connect', () => {
        socket.off('error', reject);
        resolve(new RawConnection(socket));
      });
    });
  }

  /** Resolves once the bytes are handed to the kernel; rejects when the connection has failed. */
  write(data: string | Buffer): Promise<void> {
    return new Promise((resolve, reject) =>
      this.socket.write(data, (error) => (error ? reject(error) : resolve())),
    );
  }

  /** One JSON POST on the connection; its answer read to its end. */
  async post(path: string, body: unknown): Promise<RawResponse> {
    const payload = JSON.stringify(body);
    await this.write(
      `POST ${path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n` +
        `Content-Length: ${Buffer.byteLength(payload)}\r\n\r\n${payload}`,
    );
    return this.response();
  }

  /**
   * Sends `head`, then `unit` every 100 ms — a client that never finishes its request — until the
   * server closes the connection.
   */
  async trickle(head: string, unit: string): Promise<void> {
    await this.write(head);
    const timer = setInterval(() => void this.write(unit).catch(() => undefined), 100);
    try {
      await this.closed();
    } finally {
      clearInterval(timer);
    }
  }

  /** Stops reading, as a client that sends its whole body before it reads the answer. */
  pauseReading(): void {
    this.socket.pause();
  }

  resumeReading(): void {
    this.socket.resume();
  }

  /** The next complete response; rejects if the connection ends or fails before one arrived. */
  async response(): Promise<RawResponse> {
    for (;;) {
      const parsed = this.take();
      if (parsed) return parsed;
      if (this.failure) throw this.failure;
      if (this.ended) throw new Error(`connection closed after ${this.buffer.length} bytes of a response`);
      await new Promise<void>((resolve) => (this.wake = resolve));
    }
  }

  /** Resolves when the server has closed the connection (end of stream or reset). */
  async closed(): Promise<void> {
    while (!this.ended && !this.failure) await new Promise<void>((resolve) => (this.wake = resolve));
  }

  destroy(): void {
    this.socket.destroy();
  }

  private take(): RawResponse | null {
    const headEnd = this.buffer.indexOf('\r\n\r\n');
    if (headEnd < 0) return null;
    const [statusLine, ...lines] = this.buffer.subarray(0, headEnd).toString('latin1').split('\r\n');
    const headers: Record<string, string> = {};
    for (const line of lines) {
      const colon = line.indexOf(':');
      headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
    }
    const length = Number(headers['content-length']);
    if (!Number.isInteger(length)) throw new Error(`response without Content-Length: ${statusLine}`);
    if (this.buffer.length < headEnd + 4 + length) return null;
    const text = this.buffer.subarray(headEnd + 4, headEnd + 4 + length).toString('utf8');
    this.buffer = this.buffer.subarray(headEnd + 4 + length);
    let body: unknown = text;
    try {
      body = JSON.parse(text);
    } catch {
      /* not JSON: keep the text */
    }
    return { status: Number(statusLine!.split(' ')[1]), headers, body };
  }
}
