import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { OperationalStatsRepository, isTerminalRun, RunStatus, wireVersionOf } from '@ql/domain';
import type { DeadlineSweepResult, SweepResult } from '@ql/domain';

export type Listener = 'admin' | 'ingress';

/**
 * The control plane's Prometheus series (R-OPS-1), one registry per control plane (tests run several
 * in one process). Labels are low-cardinality only: route patterns, statuses, reason codes — never
 * worker ids, session ids or label values.
 */
export class ControlPlaneMetrics {
  readonly registry = new Registry();

  private readonly heartbeats = new Counter({
    name: 'ql_heartbeats_total',
    help: 'Heartbeats accepted (fenced ones are counted in ql_fenced_refusals_total)',
    registers: [this.registry],
  });
  private readonly fenced = new Counter({
    name: 'ql_fenced_refusals_total',
    help: 'Worker ingress calls refused by a fence (409), by area and reason',
    labelNames: ['area', 'reason'] as const,
    registers: [this.registry],
  });
  private readonly rateLimitedCalls = new Counter({
    name: 'ql_ingress_rate_limited_total',
    help: 'Worker ingress calls refused 429 by the per-worker rate limit, by ingress action',
    labelNames: ['action'] as const,
    registers: [this.registry],
  });
  private readonly certificateForks = new Counter({
    name: 'ql_worker_certificate_forks_total',
    help: 'A superseded worker certificate presented to renew or register: its identity was used from two machines (ADR 0045 §4)',
    registers: [this.registry],
  });
  private readonly claims = new Counter({
    name: 'ql_claims_total',
    help: 'Pulls answered, by outcome (offered, replayed, idle) and idle reason',
    labelNames: ['outcome', 'reason'] as const,
    registers: [this.registry],
  });
  private readonly sweeps = new Counter({
    name: 'ql_sweeper_actions_total',
    help: 'What the lease sweeper did: expired leases requeued, lost, cancelled or failed; due retries requeued; attempts past their deadline timed out, retried or cancelled (deadline_*)',
    labelNames: ['action'] as const,
    registers: [this.registry],
  });
  private readonly leaseExpiries = new Counter({
    name: 'ql_lease_expiries_total',
    help: 'Run leases the sweeper ended because they expired',
    registers: [this.registry],
  });
  private readonly sweepDuration = new Histogram({
    name: 'ql_sweeper_cycle_duration_seconds',
    help: 'Duration of one lease sweeper cycle',
    buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5],
    registers: [this.registry],
  });
  private readonly bundleUploads = new Gauge({
    name: 'ql_bundle_uploads_receiving',
    help: 'Bundle uploads whose body this control plane is receiving now (at most QL_BUNDLE_UPLOADS_MAX)',
    registers: [this.registry],
  });
  private readonly http = new Histogram({
    name: 'ql_http_request_duration_seconds',
    help: 'HTTP request duration by listener, route pattern, method and status code',
    labelNames: ['listener', 'route', 'method', 'status'] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers: [this.registry],
  });

  constructor(stats: OperationalStatsRepository) {
    collectDefaultMetrics({ register: this.registry, prefix: 'ql_' });
    // Read at scrape time, two grouped statements: the database is the truth across replicas.
    let pending: ReturnType<OperationalStatsRepository['counts']> | undefined;
    const counts = () => (pending ??= stats.counts().finally(() => (pending = undefined)));
    new Gauge({
      name: 'ql_worker_sessions',
      help: 'Worker sessions by status (expired: not offline, lease past)',
      labelNames: ['status'] as const,
      registers: [this.registry],
      async collect() {
        const { sessions } = await counts();
        for (const [status, n] of Object.entries(sessions)) this.set({ status }, n);
      },
    });
    new Gauge({
      name: 'ql_worker_versions',
      help: 'Live workers (online or draining) by software version, registered protocol version and its wire version (ADR 0060): how far a rolling upgrade has come',
      labelNames: ['software', 'protocol', 'wire'] as const,
      registers: [this.registry],
      async collect() {
        const { versions } = await counts();
        // Groups seen at an earlier scrape and gone now must not linger at their old value.
        this.reset();
        for (const v of versions)
          this.set(
            {
              software: v.softwareVersion,
              protocol: String(v.protocolVersion),
              wire: String(wireVersionOf(v.protocolVersion) ?? 'unknown'),
            },
            v.workers,
          );
      },
    });
    new Gauge({
      name: 'ql_workers_recovery_required',
      help: 'Workers whose journal holds records waiting for an operator (recovery_required): they do not pull (ADR 0029)',
      registers: [this.registry],
      async collect() {
        this.set((await counts()).recoveryRequired.workers);
      },
    });
    new Gauge({
      name: 'ql_worker_journal_records_recovery_required',
      help: 'Journal records waiting for an operator, summed over workers, as their last heartbeats said',
      registers: [this.registry],
      async collect() {
        this.set((await counts()).recoveryRequired.records);
      },
    });
    new Gauge({
      name: 'ql_runs_queue_depth',
      help: 'Runs not yet finished, by status',
      labelNames: ['status'] as const,
      registers: [this.registry],
      async collect() {
        const { runs } = await counts();
        for (const [status, n] of Object.entries(runs))
          if (!isTerminalRun(status as RunStatus)) this.set({ status }, n);
      },
    });
    new Gauge({
      name: 'ql_run_outcomes',
      help: 'Finished runs in the database, by outcome',
      labelNames: ['status'] as const,
      registers: [this.registry],
      async collect() {
        const { runs } = await counts();
        for (const [status, n] of Object.entries(runs))
          if (isTerminalRun(status as RunStatus)) this.set({ status }, n);
      },
    });
  }

  heartbeatAccepted(): void {
    this.heartbeats.inc();
  }

  /** `code` is `worker_<area>_fenced`. */
  fencedRefusal(code: string, reason: string | undefined): void {
    const area = /^worker_(\w+)_fenced$/.exec(code)?.[1] ?? 'unknown';
    this.fenced.inc({ area, reason: reason ?? 'none' });
  }

  /** `action` is an ingress action name (or `unknown`): bounded, never a worker id. */
  rateLimited(action: string): void {
    this.rateLimitedCalls.inc({ action });
  }

  certificateFork(): void {
    this.certificateForks.inc();
  }

  claim(outcome: 'offered' | 'replayed' | 'idle', reason = 'none'): void {
    this.claims.inc({ outcome, reason });
  }

  sweepCycle(result: SweepResult, seconds: number, deadlines: DeadlineSweepResult): void {
    this.sweepDuration.observe(seconds);
    for (const [action, n] of Object.entries(result)) if (n > 0) this.sweeps.inc({ action }, n);
    // Own labels: `retried` and `cancelled` already name what expired leases led to.
    const passed = {
      deadline_timed_out: deadlines.timedOut,
      deadline_retried: deadlines.retried,
      deadline_cancelled: deadlines.cancelled,
    };
    for (const [action, n] of Object.entries(passed)) if (n > 0) this.sweeps.inc({ action }, n);
    const expired = result.requeued + result.lost + result.cancelled + result.failed;
    if (expired > 0) this.leaseExpiries.inc(expired);
  }

  /** One more (+1) or one fewer (-1) bundle upload body being received. */
  bundleUploadReceiving(change: 1 | -1): void {
    this.bundleUploads.inc(change);
  }

  httpRequest(listener: Listener, route: string, method: string, status: number, seconds: number): void {
    this.http.observe({ listener, route, method, status: String(status) }, seconds);
  }
}
