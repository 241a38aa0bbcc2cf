import type { Client } from 'pg';
import { loadPg } from './load-pg';
import {
  QUEUE_SIGNAL_CHANNEL,
  QueueSignalHub,
  QueueSignalListener,
  QueueSignals,
  parseQueueSignal,
} from '../queue-signals';

/** Pause before the listening connection is opened again after it failed or was dropped. */
export const LISTENER_RECONNECT_MS = 1_000;

/**
 * One dedicated connection per replica that `LISTEN`s on the queue channel (ADR 0019): the triggers
 * installed by migration `NOTIFY` it at the commit of every run that becomes queued and every
 * session change, from any replica. A dropped connection is opened again after a pause; once it is
 * back, a `resync` signal tells the waiters to look again (a notification sent meanwhile is lost).
 * Nothing here is needed for correctness: waiting pulls also re-check on their own timer.
 */
export class PostgresQueueListener implements QueueSignals {
  private readonly hub = new QueueSignalHub();
  private client: Client | undefined;
  private retry: NodeJS.Timeout | undefined;
  private closed = false;
  private connections = 0;
  private listening!: () => void;
  private ready = new Promise<void>((resolve) => (this.listening = resolve));

  constructor(
    private readonly url: string,
    private readonly reconnectMs = LISTENER_RECONNECT_MS,
  ) {}

  /** Opens the listening connection (in the background; failures retry). */
  start(): this {
    void this.connect();
    return this;
  }

  /** Resolves once `LISTEN` is in place (tests; after a reconnect, once it is back). */
  whenListening(): Promise<void> {
    return this.ready;
  }

  subscribe(listener: QueueSignalListener): () => void {
    return this.hub.subscribe(listener);
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.retry);
    this.hub.clear();
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => undefined);
  }

  private async connect(): Promise<void> {
    if (this.closed) return;
    const client = new (loadPg().Client)({ connectionString: this.url, application_name: 'ql-queue-listener' });
    let lost = false;
    const onLost = () => {
      if (lost) return;
      lost = true;
      if (this.client === client) this.client = undefined;
      void client.end().catch(() => undefined);
      if (this.closed) return;
      this.ready = new Promise<void>((resolve) => (this.listening = resolve));
      this.retry = setTimeout(() => void this.connect(), this.reconnectMs);
      this.retry.unref();
    };
    client.on('error', onLost);
    client.on('end', onLost);
    client.on('notification', (message) => {
      if (message.channel !== QUEUE_SIGNAL_CHANNEL) return;
      const signal = parseQueueSignal(message.payload ?? '');
      if (signal) this.hub.emit(signal);
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${QUEUE_SIGNAL_CHANNEL}`);
    } catch {
      onLost();
      return;
    }
    if (this.closed || lost) {
      await client.end().catch(() => undefined);
      return;
    }
    this.client = client;
    // Not the first connection: notifications sent while none listened are gone; look again.
    if (this.connections++ > 0) this.hub.emit({ kind: 'resync' });
    this.listening();
  }
}
