import { randomBytes } from 'node:crypto';
import { IngressAction, ingressPath } from '@ql/contracts';
import { LeaseSweeperService } from '../../apps/control-plane/src/leases/lease-sweeper.service';
import { newSessionId, registerBody } from '../support/fixtures';
import { prometheusSamples as samples } from '../support/prometheus-text';
import {
  Dialect,
  TestDatabase,
  TestPlane,
  createTestDatabase,
  createTestPki,
  readPair,
  startTestPlane,
} from '../support/test-plane';

describe.each<Dialect>(['sqlite', 'postgres'])('/metrics (%s)', (dialect) => {
  let db: TestDatabase;
  let pki: Awaited<ReturnType<typeof createTestPki>>;
  let t: TestPlane;

  beforeAll(async () => {
    db = await createTestDatabase(dialect);
    pki = await createTestPki(['worker-a']);
    t = await startTestPlane(db, pki, { QL_REVOCATION_CACHE_MS: '5000' });
  });
  afterAll(async () => {
    await t?.close();
    await db?.dispose();
    pki?.remove();
  });

  const scrape = async () => {
    const res = await t.admin('GET', '/metrics', undefined, t.viewerToken);
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/plain; version=0\.0\.4/);
    return samples(res.raw);
  };
  const delta = (before: Map<string, number>, after: Map<string, number>, key: string) =>
    (after.get(key) ?? 0) - (before.get(key) ?? 0);

  it('needs an API key', async () => {
    const res = await t.admin('GET', '/metrics', undefined, null);
    expect(res.status).toBe(401);
    expect(res.body).toMatchObject({ code: 'authentication_required' });
  });

  it('counts heartbeats, fenced refusals, claims, sweeps and requests by the right amounts, with low-cardinality labels only', async () => {
    const creds = readPair(pki.workers['worker-a']!);
    const sessionId = newSessionId();
    const send = (action: IngressAction, body: unknown) =>
      t.ingress(creds, ingressPath('worker-a', sessionId, action), body);
    const before = await scrape();

    const registered = await send('register', registerBody());
    expect(registered.status).toBe(200);
    let version = (registered.body as { version: number }).version;
    for (let i = 0; i < 3; i++) {
      const beat = await send('heartbeat', { generation: 1, expectedVersion: version, availableSlots: 1 });
      expect(beat.status).toBe(200);
      version = (beat.body as { version: number }).version;
    }
    const stale = await send('heartbeat', { generation: 1, expectedVersion: version + 7, availableSlots: 1 });
    expect(stale.status).toBe(409);
    const reason = (stale.body as { reason: string }).reason;
    const pull = () =>
      send('offers', {
        generation: 1,
        expectedVersion: version,
        offerId: newSessionId(),
        leaseToken: randomBytes(32).toString('base64url'),
      });
    const idle = await pull();
    expect(idle.body).toMatchObject({ status: 'idle' });
    const idleReason = (idle.body as { idle: { reason: string } }).idle.reason;
    const task = await t.admin('POST', '/api/v1/tasks', { name: 'm', command: 'true', runtime: 'shell' });
    expect(task.status).toBe(201);
    const run = await t.admin('POST', `/api/v1/tasks/${(task.body as { id: string }).id}/runs`, {});
    expect(run.status).toBe(201);
    expect((await pull()).body).toMatchObject({ status: 'offered' });
    await t.plane.ingress.get(LeaseSweeperService).sweepOnce();

    const after = await scrape();
    expect(delta(before, after, 'ql_heartbeats_total')).toBe(3);
    expect(delta(before, after, `ql_fenced_refusals_total{area="session",reason="${reason}"}`)).toBe(1);
    expect(delta(before, after, `ql_claims_total{outcome="idle",reason="${idleReason}"}`)).toBe(1);
    expect(delta(before, after, 'ql_claims_total{outcome="offered",reason="none"}')).toBe(1);
    expect(delta(before, after, 'ql_sweeper_cycle_duration_seconds_count')).toBe(1);
    expect(after.get('ql_worker_sessions{status="online"}')).toBe(1);
    expect(after.get('ql_runs_queue_depth{status="dispatching"}')).toBe(1);
    expect(after.get('ql_runs_queue_depth{status="queued"}')).toBe(0);
    expect(after.get('ql_run_outcomes{status="succeeded"}')).toBe(0);
    const heartbeatRoute =
      'ql_http_request_duration_seconds_count{listener="ingress",route="/api/v3/worker-ingress/workers/:workerId/sessions/:sessionId/heartbeat",method="POST",status="200"}';
    expect(delta(before, after, heartbeatRoute)).toBe(3);
    expect(
      delta(
        before,
        after,
        'ql_http_request_duration_seconds_count{listener="admin",route="/api/v1/tasks",method="POST",status="201"}',
      ),
    ).toBe(1);
    expect(after.get('ql_process_resident_memory_bytes')).toBeGreaterThan(0);
    // No worker, session, run ids or label values as label values.
    const names = [...after.keys()].join('\n');
    expect(names).not.toContain('worker-a');
    expect(names).not.toContain(sessionId);
    expect(names).not.toContain((run.body as { run: { id: string } }).run.id);

    // The offered lease runs out unrenewed (its expiry moved two minutes back, past any run lease):
    // the next sweep ends it once and the run goes back to the queue.
    await t.plane.core.db.run(
      dialect === 'sqlite'
        ? `UPDATE run_leases SET expires_at = expires_at - 120000 WHERE state = 'active'`
        : `UPDATE run_leases SET expires_at = expires_at - interval '120 seconds' WHERE state = 'active'`,
    );
    await t.plane.ingress.get(LeaseSweeperService).sweepOnce();
    const swept = await scrape();
    expect(delta(after, swept, 'ql_lease_expiries_total')).toBe(1);
    expect(delta(after, swept, 'ql_sweeper_actions_total{action="requeued"}')).toBe(1);
    expect(delta(after, swept, 'ql_sweeper_cycle_duration_seconds_count')).toBe(1);
    expect(swept.get('ql_runs_queue_depth{status="queued"}')).toBe(1);
    expect(swept.get('ql_runs_queue_depth{status="dispatching"}')).toBe(0);
  });
});
