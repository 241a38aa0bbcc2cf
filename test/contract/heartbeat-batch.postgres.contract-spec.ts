import { HeartbeatCommand } from '@ql/domain';
import { SqlWorkerSessionRepository } from '@ql/persistence';
import { postgresDispatchTarget } from '../support/dispatch-targets';
import { seqScans } from './claim-plans.contract';
import { DispatchFixture, DispatchTarget, SESSION_LEASE } from './dispatch.contract';
import { describeHeartbeatBatchContract } from './heartbeat-batch.contract';

describeHeartbeatBatchContract('postgres', postgresDispatchTarget);

/**
 * Issue 10 item 4 on PostgreSQL: a heartbeat's cost must not grow with the sessions. The batch
 * statement joins the JSON of its calls with `workers`; the planner guesses 100 rows for the JSON and,
 * with about a thousand workers registered, would read all of them for each batch.
 */
describe('heartbeat plans (postgres)', () => {
  let target: DispatchTarget;
  let f: DispatchFixture;
  beforeAll(async () => {
    target = postgresDispatchTarget();
    f = new DispatchFixture(await target.open());
  });
  afterAll(async () => {
    await target.dispose();
  });

  it('a heartbeat reads its own worker by key among a thousand registered ones', async () => {
    const workers = [];
    for (let i = 0; i < 1000; i += 50)
      workers.push(
        ...(await Promise.all(Array.from({ length: 50 }, (_, j) => f.worker(`plan-hb-${i + j}`)))),
      );
    await f.db.run('ANALYZE workers');
    const db = await target.openSecond();
    try {
      const sessions = new SqlWorkerSessionRepository(db, f.ids);
      const w = workers[500]!;
      let expectedVersion = w.fence.expectedVersion;
      const before = await seqScans(db);
      for (let i = 0; i < 8; i++) {
        const command: HeartbeatCommand = {
          workerId: w.workerId,
          sessionId: w.sessionId,
          fence: { generation: w.fence.generation, expectedVersion },
          leaseMs: SESSION_LEASE,
          availableSlots: 1,
        };
        expectedVersion = (await sessions.heartbeat(command)).version;
      }
      const after = await seqScans(db);
      expect(expectedVersion).toBe(w.fence.expectedVersion + 8);
      expect({ workers: after.workers! - before.workers! }).toEqual({ workers: 0 });
    } finally {
      await db.close();
    }
  });
});
