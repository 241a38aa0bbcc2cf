import { ManualClock } from '../support/fixtures';
import { CronTriggerService } from '../../apps/control-plane/src/runs/cron-trigger.service';
import {
  TestDatabase,
  TestPlane,
  createTestDatabase,
  createTestPki,
  startTestPlane,
} from '../support/test-plane';

const MINUTE = 60_000;

/** R-RUN-3: two control-plane instances on one PostgreSQL, both running cron. */
describe('cron on two control-plane instances sharing one PostgreSQL', () => {
  let db: TestDatabase;
  let pki: Awaited<ReturnType<typeof createTestPki>>;
  const planes: TestPlane[] = [];
  // Both replicas share it; the test moves it. The database keeps its own time for rows.
  const clock = new ManualClock(Date.now());

  beforeAll(async () => {
    db = await createTestDatabase('postgres');
    pki = await createTestPki(['worker-a']);
    const env = { QL_DB_POOL_SIZE: '8' };
    // Each one kept as it starts: a start that fails or times out still closes the one before it
    // (its queue listener would otherwise reconnect after the test file is torn down).
    for (let i = 0; i < 2; i++) planes.push(await startTestPlane(db, pki, env, { clock }));
  });
  afterAll(async () => {
    for (const p of planes) await p.close();
    await db?.dispose();
    pki?.remove();
  });

  const cron = (p: TestPlane) => p.plane.admin.get(CronTriggerService);
  const cronRuns = async (taskId: string) =>
    (
      await planes[0]!.plane.core.db.many<{ scheduled_at: Date; revision: number }>(
        `SELECT scheduled_at, revision FROM runs WHERE task_id = :taskId AND trigger_kind = 'cron' ORDER BY scheduled_at`,
        { taskId },
      )
    ).map((r) => ({ at: new Date(r.scheduled_at).getTime(), revision: Number(r.revision) }));

  it('each scheduled time yields exactly one run, however many ticks race on both instances', async () => {
    const created = await planes[0]!.admin('POST', '/api/v1/tasks', {
      name: 'every-minute',
      command: 'date',
      runtime: 'shell',
      cron: '* * * * *',
    });
    expect(created.status).toBe(201);
    const taskId = (created.body as { id: string }).id;
    // The task was made now; its first scheduled time is the next whole minute.
    const first = Math.ceil((Date.now() + 1) / MINUTE) * MINUTE;
    const expected: number[] = [];
    let made = 0;
    for (let minute = 0; minute < 5; minute++) {
      clock.set(first + minute * MINUTE + 1_000);
      expected.push(first + minute * MINUTE);
      // Four concurrent ticks per instance per minute, and a second round that must find nothing to do.
      const ticks = await Promise.all(planes.flatMap((p) => [1, 2, 3, 4].map(() => cron(p).tick())));
      made += ticks.reduce((a, b) => a + b, 0);
      const again = await Promise.all(planes.map((p) => cron(p).tick()));
      expect(again).toEqual([0, 0]);
    }
    expect(made).toBe(5);
    expect(await cronRuns(taskId)).toEqual(expected.map((at) => ({ at, revision: 1 })));
  });

  it('a time before the task existed never fires; an edit never fires a time that already fired', async () => {
    const created = await planes[1]!.admin('POST', '/api/v1/tasks', {
      name: 'every-five',
      command: 'date',
      runtime: 'shell',
      cron: '*/5 * * * *',
    });
    const task = created.body as { id: string; spec: Record<string, unknown> };
    clock.set(Date.now() - 10 * MINUTE); // a clock behind the task's creation
    expect(await Promise.all(planes.map((p) => cron(p).tick()))).toEqual([0, 0]);
    clock.set(Math.ceil(Date.now() / (5 * MINUTE)) * 5 * MINUTE + 1_000);
    await Promise.all(planes.map((p) => cron(p).tick()));
    const edited = await planes[0]!.admin('PUT', `/api/v1/tasks/${task.id}`, {
      ...task.spec,
      command: 'date -u',
    });
    expect(edited.body).toMatchObject({ revision: 2, changed: true });
    // Revision 2 was made after that scheduled time (in the database's clock): it does not fire it again.
    await Promise.all(planes.map((p) => cron(p).tick()));
    const runs = await cronRuns(task.id);
    expect(runs).toHaveLength(1);
    expect(runs[0]!.revision).toBe(1);
  });
});
