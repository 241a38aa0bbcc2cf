import { UnavailableError } from '@ql/domain';

/**
 * The wait for a pooled PostgreSQL connection, bounded apart from the connect timeout (ADR 0039).
 * pg-pool bounds both with one `connectionTimeoutMillis`: a burst that keeps every connection busy
 * for longer than the connect timeout failed as "database unreachable" although the database was
 * answering. One permit per pool slot: a holder always finds an idle connection or room for a new
 * one, so pg's timeout bounds only making a connection; the wait for a permit is bounded by
 * `waitMs` and refused as `database_busy` (the code SQLite uses when it stays locked).
 */
export class PoolGate {
  private free: number;
  private readonly waiting: Array<() => void> = [];

  constructor(
    private readonly size: number,
    private readonly waitMs: number,
  ) {
    this.free = size;
  }

  /** Resolves with the release of one permit; rejects after `waitMs` with `database_busy`. */
  acquire(): Promise<() => void> {
    if (this.free > 0) {
      this.free--;
      return Promise.resolve(this.releaser());
    }
    return new Promise((grant, refuse) => {
      const waiter = () => {
        clearTimeout(timer);
        grant(this.releaser());
      };
      const timer = setTimeout(() => {
        this.waiting.splice(this.waiting.indexOf(waiter), 1);
        refuse(
          new UnavailableError(
            'database_busy',
            `no database connection was free within ${this.waitMs} ms (all ${this.size} in use); retry later`,
          ),
        );
      }, this.waitMs);
      this.waiting.push(waiter);
    });
  }

  private releaser(): () => void {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = this.waiting.shift();
      if (next) next();
      else this.free++;
    };
  }
}
