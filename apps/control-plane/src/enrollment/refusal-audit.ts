import { Inject, Injectable, Logger, OnApplicationShutdown } from '@nestjs/common';
import {
  AuditEntry,
  CLOCK,
  Clock,
  WORKER_CERTIFICATE_REPOSITORY,
  WorkerCertificateRepository,
} from '@ql/domain';
import { CORE, ControlPlaneCore } from '../core/core';

/** One source address's refusals in the current window. */
interface Window {
  readonly start: number;
  written: number;
  counted: number;
  readonly codes: Record<string, number>;
}

/** Where the refusals of addresses beyond `MAX_ADDRESSES` are counted together. */
const OTHER_ADDRESSES = '*';
/** Addresses with a window of their own at once: bounds memory and the summary rows per window. */
const MAX_ADDRESSES = 4096;

/**
 * Refused enrollments are written by anyone who can reach the ingress, without authentication, so
 * their audit rows are bounded per source address (issue 27 item 9, ADR 0045): in each window of
 * `QL_ENROLL_AUDIT_WINDOW_MS` the first `QL_ENROLL_AUDIT_ROWS` refusals from an address are written in
 * full (their detail names the address); the rest are counted, by code, and written as one
 * `enrollment.refuse_summary` row when the window is over — at the address's next refusal, by the
 * sweep every window, or when the listener closes. At most `MAX_ADDRESSES` addresses have a window
 * of their own; the rest share one (`*`). Per replica, in memory: a restart writes what it counted.
 */
export class RefusalAudit {
  private readonly windows = new Map<string, Window>();

  constructor(
    private readonly write: (entry: AuditEntry) => Promise<void>,
    private readonly now: () => number,
    private readonly windowMs: number,
    private readonly rows: number,
    private readonly maxAddresses = MAX_ADDRESSES,
  ) {}

  /** Audits one refusal from `address` (written, or counted under `code`). */
  async refused(address: string, code: string, entry: AuditEntry): Promise<void> {
    const now = this.now();
    const due: AuditEntry[] = [];
    let key = address;
    let window = this.windows.get(key);
    if (window && now >= window.start + this.windowMs) {
      due.push(...this.close(key, window, now));
      window = undefined;
    }
    if (!window) {
      if (this.windows.size >= this.maxAddresses) key = OTHER_ADDRESSES;
      window = this.windows.get(key);
      if (!window) {
        window = { start: now, written: 0, counted: 0, codes: {} };
        this.windows.set(key, window);
      }
    }
    if (window.written < this.rows) {
      window.written += 1;
      due.push({ ...entry, detail: { ...entry.detail, address } });
    } else {
      window.counted += 1;
      window.codes[code] = (window.codes[code] ?? 0) + 1;
    }
    for (const row of due) await this.write(row);
  }

  /** Writes the summary of every window that is over (all of them with `all`). */
  async flush(all = false): Promise<void> {
    const now = this.now();
    const due: AuditEntry[] = [];
    for (const [key, window] of [...this.windows])
      if (all || now >= window.start + this.windowMs) due.push(...this.close(key, window, now));
    for (const row of due) await this.write(row);
  }

  /** Forgets the window (synchronously: a refusal arriving meanwhile opens a new one); its summary, if any. */
  private close(key: string, window: Window, now: number): AuditEntry[] {
    this.windows.delete(key);
    if (window.counted === 0) return [];
    const target = `address:${key}`;
    return [
      {
        actor: target,
        action: 'enrollment.refuse_summary',
        target,
        detail: {
          address: key,
          refused: window.counted,
          codes: window.codes,
          from: new Date(window.start).toISOString(),
          to: new Date(Math.min(now, window.start + this.windowMs)).toISOString(),
        },
      },
    ];
  }
}

/** The enrollment route's `RefusalAudit`, swept every window and flushed once the ingress has closed. */
@Injectable()
export class EnrollmentRefusalAudit extends RefusalAudit implements OnApplicationShutdown {
  private readonly logger = new Logger('enrollment');
  private readonly sweep: NodeJS.Timeout;

  constructor(
    @Inject(CORE) core: ControlPlaneCore,
    @Inject(CLOCK) clock: Clock,
    @Inject(WORKER_CERTIFICATE_REPOSITORY) certificates: WorkerCertificateRepository,
  ) {
    const { enrollAuditWindowMs, enrollAuditRows } = core.config;
    super(
      (entry) => certificates.auditRefusal(entry),
      () => clock.now(),
      enrollAuditWindowMs,
      enrollAuditRows,
    );
    this.sweep = setInterval(
      () =>
        void this.flush().catch((error: Error) =>
          this.logger.warn({ msg: 'refusal summary not written', error: error.message }),
        ),
      enrollAuditWindowMs,
    ).unref();
  }

  // After the listener stopped (no refusal can come in any more), before the database closes.
  async onApplicationShutdown(): Promise<void> {
    clearInterval(this.sweep);
    await this.flush(true);
  }
}
