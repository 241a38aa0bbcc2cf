import { CronTriggerService } from '../../apps/control-plane/src/runs/cron-trigger.service';
import { ManualClock } from '../support/fixtures';
import {
  TestDatabase,
  TestPlane,
  createTestDatabase,
  createTestPki,
  startTestPlane,
} from '../support/test-plane';

const SECOND = 1_000;
const MINUTE = 60_000;
const DAY = 86_400_000;
const SHANGHAI = 8 * 3_600_000; // UTC+8 all year (no DST since 1991)

interface TaskView {
  id: string;
  revision: number;
  spec: Record<string, unknown>;
}

/** What QingLong users write (six fields, names, a zone) on both dialects: stored, fired, refused with a reason. */
describe.each(['sqlite', 'postgres'] as const)('cron as QingLong users write it (%s)', (dialect) => {
  let db: TestDatabase;
  let pki: Awaited<ReturnType<typeof createTestPki>>;
  let t: TestPlane;
  const clock = new ManualClock(Date.now());

  beforeAll(async () => {
    db = await createTestDatabase(dialect);
    pki = await createTestPki(['worker-a']);
    t = await startTestPlane(db, pki, {}, { clock });
  });
  // SQLite takes row times from this clock: each test starts at the real now, so its task is made now.
  beforeEach(() => clock.set(Date.now()));
  afterAll(async () => {
    await t?.close();
    await db?.dispose();
    pki?.remove();
  });

  const tick = () => t.plane.admin.get(CronTriggerService).tick();
  const cronTimes = async (taskId: string) =>
    (
      await t.plane.core.db.many<{ scheduled_at: Date | number }>(
        `SELECT scheduled_at FROM runs WHERE task_id = :taskId AND trigger_kind = 'cron' ORDER BY scheduled_at`,
        { taskId },
      )
    ).map((r) => new Date(r.scheduled_at).toISOString());
  const create = async (name: string, extra: Record<string, unknown>) => {
    const res = await t.admin('POST', '/api/v1/tasks', { name, command: 'date', runtime: 'shell', ...extra });
    expect(res.status).toBe(201);
    return res.body as TaskView;
  };

  it('`0 0 8 * * MON-FRI` in Asia/Shanghai is stored with its zone and fires at 08:00 Shanghai on weekdays', async () => {
    const task = await create('weekday-mornings', { cron: '0 0 8 * * MON-FRI', timezone: 'Asia/Shanghai' });
    expect(task.spec).toMatchObject({ cron: '0 0 8 * * MON-FRI', timezone: 'Asia/Shanghai' });
    // The next weekday 08:00 in Shanghai after now, worked out by hand: 00:00 UTC on a Shanghai weekday.
    let due = Math.ceil((Date.now() + 1) / DAY) * DAY;
    while (![1, 2, 3, 4, 5].includes(new Date(due + SHANGHAI).getUTCDay())) due += DAY;
    clock.set(due - SECOND);
    await tick();
    expect(await cronTimes(task.id)).toEqual([]);
    clock.set(due + 1_500);
    expect(await tick()).toBeGreaterThanOrEqual(1);
    expect(await cronTimes(task.id)).toEqual([new Date(due).toISOString()]);
  });

  it('a seconds field fires on its seconds', async () => {
    const task = await create('half-minutes', { cron: '15,45 * * * * *' });
    const minute = Math.ceil((Date.now() + MINUTE) / MINUTE) * MINUTE;
    clock.set(minute + 16 * SECOND);
    await tick();
    clock.set(minute + 50 * SECOND);
    await tick();
    expect(await cronTimes(task.id)).toEqual([
      new Date(minute + 15 * SECOND).toISOString(),
      new Date(minute + 45 * SECOND).toISOString(),
    ]);
  });

  it('a task whose zone this replica does not know is skipped; the other tasks still fire', async () => {
    const unknown = await create('zone-from-a-newer-runtime', {
      cron: '* * * * *',
      timezone: 'Asia/Shanghai',
    });
    // As if a replica with newer time zone data had accepted it.
    const spec = JSON.stringify({ ...unknown.spec, timezone: 'Mars/Olympus_Mons' });
    await t.plane.core.db.run('UPDATE tasks SET spec_json = :spec WHERE id = :id', { spec, id: unknown.id });
    const fine = await create('every-minute-too', { cron: '* * * * *' });
    const minute = Math.ceil((Date.now() + 1) / MINUTE) * MINUTE;
    clock.set(minute + SECOND);
    await tick();
    await tick();
    expect(await cronTimes(fine.id)).toEqual([new Date(minute).toISOString()]);
    expect(await cronTimes(unknown.id)).toEqual([]);
  });

  it('a zone change is a new revision; naming the default zone is not', async () => {
    const body = { name: 'zoned', command: 'date', runtime: 'shell', cron: '0 8 * * mon' };
    const task = await create(body.name, { cron: body.cron });
    expect(task.spec).not.toHaveProperty('timezone');
    const same = await t.admin('PUT', `/api/v1/tasks/${task.id}`, { ...body, timezone: 'UTC' });
    expect(same.body).toMatchObject({ revision: 1, changed: false });
    const moved = await t.admin('PUT', `/api/v1/tasks/${task.id}`, { ...body, timezone: 'Europe/Berlin' });
    expect(moved.body).toMatchObject({ revision: 2, changed: true, spec: { timezone: 'Europe/Berlin' } });
    const revisions = await t.admin('GET', `/api/v1/tasks/${task.id}/revisions`);
    const specs = (revisions.body as { items: { revision: number; spec: TaskView['spec'] }[] }).items;
    expect(specs.find((r) => r.revision === 2)!.spec.timezone).toBe('Europe/Berlin');
    expect(specs.find((r) => r.revision === 1)!.spec).not.toHaveProperty('timezone');
  });

  it.each<[string, Record<string, unknown>, string]>([
    [
      'an unknown day name',
      { cron: '0 8 * * MOM' },
      'day-of-week field "MOM": "MOM" is not a number 0-7 or a name SUN-SAT',
    ],
    [
      'four fields',
      { cron: '0 8 * *' },
      'expected 5 fields (minute hour day-of-month month day-of-week) or 6 (second first), got 4',
    ],
    [
      'seconds 5 apart',
      { cron: '*/5 * * * * *' },
      'second field: times 5 s apart; at most one time every 10 s',
    ],
    [
      'an unknown zone',
      { cron: '0 8 * * *', timezone: 'Mars/Base' },
      'timezone: invalid_timezone: unknown time zone "Mars/Base"',
    ],
    ['a zone without a cron', { timezone: 'Asia/Shanghai' }, 'timezone: requires_cron'],
    // Refused at the edge by the DTO's name pattern (newer runtimes' Intl would take it).
    ['a numeric offset as a zone', { cron: '0 8 * * *', timezone: '+08:00' }, 'timezone: invalid_format'],
  ])('refuses %s with the reason in the detail and writes nothing', async (_name, extra, why) => {
    const before = await t.plane.core.db.one<{ n: number | string }>('SELECT COUNT(*) AS n FROM tasks');
    const res = await t.admin('POST', '/api/v1/tasks', {
      name: 'refused',
      command: 'date',
      runtime: 'shell',
      ...extra,
    });
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ code: 'invalid_request' });
    expect((res.body as { detail: string }).detail).toContain(why);
    const after = await t.plane.core.db.one<{ n: number | string }>('SELECT COUNT(*) AS n FROM tasks');
    expect(Number(after!.n)).toBe(Number(before!.n));
  });
});
