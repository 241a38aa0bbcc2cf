import { ControlPlaneMetrics } from './control-plane-metrics';

const stats = {
  counts: async () => ({
    sessions: { online: 2, draining: 1, offline: 0, expired: 1, disabled: 0 },
    runs: { queued: 4, succeeded: 9 },
    recoveryRequired: { workers: 1, records: 2 },
    versions: [
      { softwareVersion: '0.1.0', protocolVersion: 4, workers: 2 },
      { softwareVersion: '0.0.9', protocolVersion: 3, workers: 1 },
    ],
  }),
};

describe('ControlPlaneMetrics', () => {
  it('a sweep cycle counts each action, and every expired lease once (requeued, lost, cancelled, failed — not retries nor deadlines)', async () => {
    const metrics = new ControlPlaneMetrics(stats);
    const deadlines = { timedOut: 3, retried: 0, cancelled: 1 };
    metrics.sweepCycle({ requeued: 2, lost: 1, cancelled: 1, failed: 1, retried: 5 }, 0.002, deadlines);
    metrics.sweepCycle({ requeued: 0, lost: 0, cancelled: 0, failed: 0, retried: 0 }, 0.001, {
      timedOut: 0,
      retried: 0,
      cancelled: 0,
    });
    const text = await metrics.registry.metrics();
    expect(text).toContain('ql_lease_expiries_total 5\n');
    expect(text).toContain('ql_sweeper_actions_total{action="retried"} 5\n');
    expect(text).toContain('ql_sweeper_actions_total{action="requeued"} 2\n');
    expect(text).toContain('ql_sweeper_actions_total{action="deadline_timed_out"} 3\n');
    expect(text).toContain('ql_sweeper_actions_total{action="deadline_cancelled"} 1\n');
    expect(text).not.toContain('action="deadline_retried"');
    expect(text).toContain('ql_sweeper_cycle_duration_seconds_count 2\n');
  });

  it('fenced refusals are labelled by area and reason taken from the wire code', async () => {
    const metrics = new ControlPlaneMetrics(stats);
    metrics.fencedRefusal('worker_lease_fenced', 'token_mismatch');
    metrics.fencedRefusal('worker_session_fenced', undefined);
    const text = await metrics.registry.metrics();
    expect(text).toContain('ql_fenced_refusals_total{area="lease",reason="token_mismatch"} 1\n');
    expect(text).toContain('ql_fenced_refusals_total{area="session",reason="none"} 1\n');
  });

  it('gauges come from the database counts at scrape time, split into queue depth and outcomes', async () => {
    const text = await new ControlPlaneMetrics(stats).registry.metrics();
    expect(text).toContain('ql_worker_sessions{status="expired"} 1\n');
    expect(text).toContain('ql_runs_queue_depth{status="queued"} 4\n');
    expect(text).toContain('ql_run_outcomes{status="succeeded"} 9\n');
    expect(text).not.toContain('ql_runs_queue_depth{status="succeeded"}');
    expect(text).toContain('ql_workers_recovery_required 1\n');
    expect(text).toContain('ql_worker_journal_records_recovery_required 2\n');
    expect(text).toContain('ql_worker_versions{software="0.1.0",protocol="4",wire="2"} 2\n');
    expect(text).toContain('ql_worker_versions{software="0.0.9",protocol="3",wire="1"} 1\n');
  });
});
