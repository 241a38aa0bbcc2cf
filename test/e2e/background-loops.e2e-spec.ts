import { randomBytes } from 'node:crypto';
import { ingressPath } from '@ql/contracts';
import { ManualClock, newSessionId, registerBody } from '../support/fixtures';
import {
  TestDatabase,
  TestPlane,
  createTestDatabase,
  createTestPki,
  readPair,
  startTestPlane,
} from '../support/test-plane';

const MINUTE = 60_000;

/** Polls `read` until `done` holds (the loops run on their own timers), failing after `ms`. */
async function eventually<T>(read: () => Promise<T>, done: (value: T) => boolean, ms = 10_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    if (Date.now() > deadline) throw new Error(`condition not reached in ${ms} ms: ${JSON.stringify(value)}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** The sweeper and cron loops are wired into the running control plane and act on their own. */
describe('background loops of the control plane (sqlite)', () => {
  let db: TestDatabase;
  let pki: Awaited<ReturnType<typeof createTestPki>>;
  let t: TestPlane;
  // On SQLite the database reads its time from this clock too.
  const clock = new ManualClock(Date.now());

  beforeAll(async () => {
    db = await createTestDatabase('sqlite');
    pki = await createTestPki(['worker-a']);
    t = await startTestPlane(
      db,
      pki,
      { QL_SWEEP_INTERVAL_MS: '20', QL_CRON_TICK_MS: '20', QL_SESSION_LEASE_MS: '600000' },
      { clock },
    );
  });
  afterAll(async () => {
    await t?.close();
    await db?.dispose();
    pki?.remove();
  });

  it('the cron loop creates the run of a scheduled time without being called', async () => {
    const created = await t.admin('POST', '/api/v1/tasks', {
      name: 'minutely',
      command: 'date',
      runtime: 'shell',
      cron: '* * * * *',
    });
    expect(created.status).toBe(201);
    const taskId = (created.body as { id: string }).id;
    const scheduled = Math.ceil((clock.now() + 1) / MINUTE) * MINUTE;
    clock.set(scheduled + 1_000);
    const runs = await eventually(
      async () =>
        (await t.admin('GET', `/api/v1/runs?taskId=${taskId}`)).body as {
          items: { trigger: string; scheduledAt: string }[];
        },
      (body) => body.items.length > 0,
    );
    expect(runs.items).toEqual([
      expect.objectContaining({ trigger: 'cron', scheduledAt: new Date(scheduled).toISOString() }),
    ]);
  });

  it('the sweeper loop returns an expired, unstarted lease to the queue without being called', async () => {
    const creds = readPair(pki.workers['worker-a']!);
    const sessionId = newSessionId();
    const reg = await t.ingress(creds, ingressPath('worker-a', sessionId, 'register'), registerBody());
    expect(reg.status).toBe(200);
    const session = reg.body as { generation: number; version: number };
    const task = await t.admin('POST', '/api/v1/tasks', {
      name: 'urgent',
      command: 'true',
      runtime: 'shell',
    });
    const taskId = (task.body as { id: string }).id;
    // The highest priority: offered before anything else left queued in this database.
    const trigger = await t.admin('POST', `/api/v1/tasks/${taskId}/runs`, { priority: 1000 });
    const runId = (trigger.body as { run: { id: string } }).run.id;
    const pull = await t.ingress(creds, ingressPath('worker-a', sessionId, 'offers'), {
      generation: session.generation,
      expectedVersion: session.version,
      offerId: newSessionId(),
      leaseToken: randomBytes(32).toString('base64url'),
    });
    expect(pull.body).toMatchObject({ status: 'offered', run: { runId } });
    // Past the run lease (QL_RUN_LEASE_MS, 60 s by default): the next sweeper cycle must act.
    clock.advance(61_000);
    const detail = await eventually(
      async () =>
        (await t.admin('GET', `/api/v1/runs/${runId}`)).body as {
          status: string;
          events: { type: string }[];
        },
      (body) => body.status === 'queued',
    );
    expect(detail.events.map((e) => e.type)).toEqual([
      'run.created',
      'run.dispatching',
      'attempt.claimed',
      'attempt.lease_expired',
      'run.requeued',
    ]);
  });
});
