// Issue 31 item 3 on both dialects: 2,000 QingLong-style tasks are found by search on name and
// command (Chinese, and letters in any case, Unicode included: SQLite's `lower` is ASCII-only, so the
// fold is ours), paged without a gap or a repeat, filtered by enabled and by the newest run's
// status; a pinned task comes first; a disabled cron task keeps its schedule, shows no next fire and
// is skipped by the cron; the list says each task's newest run. Bad input changes nothing.
import { CronTriggerService } from '../../apps/control-plane/src/runs/cron-trigger.service';
import { snapshotDatabase } from '../support/db-snapshot';
import { ManualClock } from '../support/fixtures';
import {
  Dialect,
  TestDatabase,
  TestPlane,
  createTestDatabase,
  createTestPki,
  startTestPlane,
} from '../support/test-plane';

jest.setTimeout(300_000);

const MINUTE = 60_000;
const MANY = 2_000;

interface Item {
  id: string;
  name: string;
  enabled: boolean;
  pinned: boolean;
  lastRun: { id: string; status: string } | null;
  nextFireAt: string | null;
}
interface Page {
  items: Item[];
  nextAfter: string | null;
}

describe.each<Dialect>(['sqlite', 'postgres'])('tasks at scale (%s)', (dialect) => {
  let db: TestDatabase;
  let pki: Awaited<ReturnType<typeof createTestPki>>;
  let t: TestPlane;
  const clock = new ManualClock(Date.now());
  const ids = new Map<string, string>();

  const create = async (name: string, command: string, extra: Record<string, unknown> = {}) => {
    const res = await t.admin('POST', '/api/v1/tasks', { name, command, runtime: 'shell', ...extra });
    expect(res.status).toBe(201);
    ids.set(name, (res.body as { id: string }).id);
    return (res.body as { id: string }).id;
  };
  const list = async (query: string) => {
    const res = await t.admin('GET', `/api/v1/tasks?${query}`);
    expect(res.status).toBe(200);
    return res.body as Page;
  };
  const names = async (query: string) => (await list(`limit=200&${query}`)).items.map((i) => i.name);

  beforeAll(async () => {
    db = await createTestDatabase(dialect);
    pki = await createTestPki([]);
    t = await startTestPlane(db, pki, {}, { clock });
    // QingLong-style names and commands, eight at a time.
    const made = Array.from({ length: MANY }, (_, i) => [`任务 ${i}`, `task script_${i}.js`] as const);
    for (let i = 0; i < made.length; i += 8)
      await Promise.all(made.slice(i, i + 8).map(([name, command]) => create(name, command)));
    await create('京东签到', 'node jd_sign.js');
    await create('JD Cookie 检查', 'python3 check_cookie.py');
    await create('ÅNGSTRÖM 天气', 'bash weather.sh');
    await create('每分钟 100%_进度', 'echo 100%', { cron: '* * * * *', timezone: 'Asia/Shanghai' });
  });
  afterAll(async () => {
    await t?.close();
    await db?.dispose();
    pki?.remove();
  });

  it('finds tasks by part of the name or command, in any case, Unicode included; % and _ are literal', async () => {
    expect(await names(`q=${encodeURIComponent('京东')}`)).toEqual(['京东签到']);
    expect((await names('q=jd')).sort()).toEqual(['JD Cookie 检查', '京东签到']);
    expect(await names(`q=${encodeURIComponent('COOKIE.PY')}`)).toEqual(['JD Cookie 检查']);
    expect(await names(`q=${encodeURIComponent('ångström')}`)).toEqual(['ÅNGSTRÖM 天气']);
    expect(await names(`q=${encodeURIComponent('100%_')}`)).toEqual(['每分钟 100%_进度']);
    expect(await names(`q=${encodeURIComponent('0%_')}`)).toEqual(['每分钟 100%_进度']);
    expect(await names(`q=${encodeURIComponent('任务 1999')}`)).toEqual(['任务 1999']);
    expect(await names(`q=${encodeURIComponent('script_123.')}`)).toEqual(['任务 123']);
  });

  it('pages through every task once, pinned first, with no gap or repeat', async () => {
    const pinned = ids.get('任务 1500')!;
    const res = await t.admin('PATCH', `/api/v1/tasks/${pinned}`, { pinned: true });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ id: pinned, pinned: true, enabled: true, revision: 1 });
    const seen: string[] = [];
    let after: string | null = null;
    let first: Item | undefined;
    do {
      const page: Page = await list(`limit=200${after ? `&after=${after}` : ''}`);
      first ??= page.items[0];
      seen.push(...page.items.map((i) => i.id));
      after = page.nextAfter;
    } while (after);
    expect(first?.id).toBe(pinned);
    expect(seen).toHaveLength(MANY + 4);
    expect(new Set(seen).size).toBe(MANY + 4);
    expect((await t.admin('PATCH', `/api/v1/tasks/${pinned}`, { pinned: false })).status).toBe(200);
  });

  it('a disabled cron task keeps its schedule, shows no next fire and is skipped; enabled again, it fires', async () => {
    const id = ids.get('每分钟 100%_进度')!;
    const item = async () => (await list(`q=${encodeURIComponent('100%')}`)).items[0]!;
    expect((await item()).nextFireAt).toEqual(expect.any(String));
    const disabled = await t.admin('PATCH', `/api/v1/tasks/${id}`, { enabled: false });
    expect(disabled.body).toMatchObject({ enabled: false, revision: 1, spec: { cron: '* * * * *' } });
    expect(await item()).toMatchObject({ enabled: false, nextFireAt: null });
    expect(await names('enabled=false')).toEqual(['每分钟 100%_进度']);
    const cron = t.plane.admin.get(CronTriggerService);
    const next = Math.ceil((Date.now() + 1) / MINUTE) * MINUTE;
    clock.set(next + 1_000);
    expect(await cron.tick()).toBe(0);
    expect((await item()).lastRun).toBeNull();
    expect((await t.admin('PATCH', `/api/v1/tasks/${id}`, { enabled: true })).status).toBe(200);
    clock.set(next + MINUTE + 1_000);
    expect(await cron.tick()).toBe(1);
    const fired = await item();
    expect(fired).toMatchObject({ enabled: true, lastRun: { status: 'queued' } });
    // The newest run's status filters the list (no worker here: it stays queued).
    expect(await names('lastStatus=queued')).toEqual(['每分钟 100%_进度']);
    expect(await names('lastStatus=succeeded')).toEqual([]);
    const audit = (await t.admin('GET', '/api/v1/audit?limit=20')).body as {
      items: { action: string; target: string }[];
    };
    expect(audit.items.filter((e) => e.action === 'task.state' && e.target === `task:${id}`)).toHaveLength(2);
  });

  it('bulk: one action on many tasks, each on its own; a refusal of one is its result; run is idempotent by key', async () => {
    const some = ['任务 10', '任务 11', '任务 12'].map((n) => ids.get(n)!);
    const gone = '01938e1e-0000-7000-8000-0000000000ff';
    const disabled = await t.admin('POST', '/api/v1/tasks/bulk', {
      action: 'disable',
      taskIds: [...some, gone],
    });
    expect(disabled.status).toBe(200);
    expect(disabled.body).toEqual({
      action: 'disable',
      results: [
        ...some.map((taskId) => ({ taskId, ok: true })),
        { taskId: gone, ok: false, code: 'not_found', message: expect.any(String) },
      ],
    });
    expect((await names(`enabled=false&q=${encodeURIComponent('任务 1')}`)).sort()).toEqual([
      '任务 10',
      '任务 11',
      '任务 12',
    ]);
    const run = () =>
      t.admin('POST', '/api/v1/tasks/bulk', { action: 'run', taskIds: some.slice(0, 2) }, undefined, {
        headers: { 'idempotency-key': 'console-bulk-1' },
      });
    const first = (await run()).body as { results: { runId: string }[] };
    const again = (await run()).body as { results: { runId: string }[] };
    expect(first.results.map((r) => r.runId)).toEqual(again.results.map((r) => r.runId));
    expect(new Set(first.results.map((r) => r.runId)).size).toBe(2);
    const deleted = await t.admin('POST', '/api/v1/tasks/bulk', { action: 'delete', taskIds: [some[2]] });
    expect(deleted.body).toMatchObject({ results: [{ taskId: some[2], ok: true }] });
    const left = await names(`q=${encodeURIComponent('任务 12')}`);
    expect(left).not.toContain('任务 12');
    expect(left).toHaveLength(110); // 任务 120 … 129 and 任务 1200 … 1299
  });

  it('refuses bad input with a clear error and changes nothing', async () => {
    const before = await snapshotDatabase(t.plane.core.db);
    const id = ids.get('京东签到')!;
    for (const [path, body] of [
      [`/api/v1/tasks/${id}`, {}],
      [`/api/v1/tasks/${id}`, { enabled: 'no' }],
      [`/api/v1/tasks/${id}`, { enabled: false, name: 'x' }],
      [`/api/v1/tasks/${id}`, { pinned: null }],
    ] as const)
      expect((await t.admin('PATCH', path, body)).status).toBe(400);
    expect(
      (await t.admin('PATCH', '/api/v1/tasks/01938e1e-0000-7000-8000-000000000001', { pinned: true })).status,
    ).toBe(404);
    for (const body of [
      { action: 'archive', taskIds: [id] },
      { action: 'disable', taskIds: [] },
      { action: 'disable', taskIds: [id, id] },
      { action: 'disable', taskIds: ['not-a-uuid'] },
      { action: 'disable', taskIds: Array.from({ length: 201 }, () => id) },
      { action: 'disable' },
    ])
      expect((await t.admin('POST', '/api/v1/tasks/bulk', body)).status).toBe(400);
    // A malformed Idempotency-Key is refused whole, as on the single trigger route: no run is made.
    const badKey = await t.admin('POST', '/api/v1/tasks/bulk', { action: 'run', taskIds: [id] }, undefined, {
      headers: { 'idempotency-key': 'bad key with spaces' },
    });
    expect(badKey.status).toBe(400);
    for (const query of [`q=${'x'.repeat(129)}`, 'enabled=maybe', 'lastStatus=done', 'sort=name'])
      expect((await t.admin('GET', `/api/v1/tasks?${query}`)).status).toBe(400);
    expect(await snapshotDatabase(t.plane.core.db)).toEqual(before);
  });
});
