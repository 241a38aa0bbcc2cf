// Runs receive the global env vars (issue 31 item 2, ADR 0061) on both dialects: the run's detail
// names what it received (never a value), the task's own env wins, and a task that would break a task
// limit with them is refused on a trigger and skipped with a warning by the cron while the others fire.
import { randomBytes } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';
import { CronTriggerService } from '../../apps/control-plane/src/runs/cron-trigger.service';
import { LevelledLog } from '../support/captured-log';
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

const MINUTE = 60_000;
const COOKIES = 'pt_key=AAAA-runs-env-one;pt_pin=a&pt_key=BBBB-runs-env-two;pt_pin=b';

describe.each<Dialect>(['sqlite', 'postgres'])('env vars in runs (%s)', (dialect) => {
  let db: TestDatabase;
  let pki: Awaited<ReturnType<typeof createTestPki>>;
  let t: TestPlane;
  const clock = new ManualClock(Date.now());
  const log = new LevelledLog();

  beforeAll(async () => {
    db = await createTestDatabase(dialect);
    pki = await createTestPki([]);
    t = await startTestPlane(
      db,
      pki,
      { QL_SECRETS_KEY: randomBytes(32).toString('base64'), QL_SECRETS_KEY_ID: 'k1' },
      { clock, logger: log },
    );
  });
  beforeEach(() => clock.set(Date.now()));
  afterAll(async () => {
    await t?.close();
    await db?.dispose();
    pki?.remove();
  });

  const task = async (name: string, extra: Record<string, unknown> = {}) => {
    const res = await t.admin('POST', '/api/v1/tasks', {
      name,
      command: 'node jd_sign.js',
      runtime: 'node',
      ...extra,
    });
    expect(res.status).toBe(201);
    return res.body as { id: string; digest: string };
  };
  const variable = async (body: Record<string, unknown>) =>
    expect((await t.admin('POST', '/api/v1/env-vars', body)).status).toBe(201);

  it('a run’s detail lists the variables it received, in order, with versions; the task’s own value of a name wins', async () => {
    await variable({ name: 'JD_COOKIE', value: COOKIES, secret: true, remark: '两个账号' });
    await variable({ name: 'JD_UA', value: 'jdapp;iPhone' });
    await variable({ name: 'QL_DEBUG', value: 'true', enabled: false });
    expect(
      (await t.admin('PATCH', '/api/v1/env-vars/JD_COOKIE', { value: `${COOKIES}&pt_key=3` })).status,
    ).toBe(200);
    const own = await task('京东签到', { env: { JD_UA: 'task-own-ua' } });
    const run = await t.admin('POST', `/api/v1/tasks/${own.id}/runs`, {});
    expect(run.status).toBe(201);
    const runId = (run.body as { run: { id: string } }).run.id;
    const detail = await t.admin('GET', `/api/v1/runs/${runId}`, undefined, t.viewerToken);
    expect(detail.body).toMatchObject({ envVars: [{ name: 'JD_COOKIE', version: 2, secret: true }] });
    expect((detail.body as { specDigest: string }).specDigest).not.toBe(own.digest);
    expect(detail.raw).not.toMatch(/runs-env-(one|two)/);

    const plain = await task('京东签到-默认 UA');
    const second = await t.admin('POST', `/api/v1/tasks/${plain.id}/runs`, {});
    const secondId = (second.body as { run: { id: string } }).run.id;
    expect((await t.admin('GET', `/api/v1/runs/${secondId}`)).body).toMatchObject({
      envVars: [
        { name: 'JD_COOKIE', version: 2, secret: true },
        { name: 'JD_UA', version: 1, secret: false },
      ],
    });
  });

  it('a task that breaks a task limit with the variables: a trigger is 409 env_vars_do_not_fit writing nothing; the cron skips it with a warning and fires the others', async () => {
    for (let i = 0; i < 7; i++) await variable({ name: `BIG_${i}`, value: 'x'.repeat(1900) });
    const big = 'y'.repeat(4000);
    const heavy = await task('大任务', {
      env: { OWN_1: big, OWN_2: big, OWN_3: big, OWN_4: big, OWN_5: big },
      cron: '* * * * *',
    });
    const light = await task('京东签到-每分钟', { cron: '* * * * *' });
    const before = await snapshotDatabase(t.plane.core.db);
    const refused = await t.admin('POST', `/api/v1/tasks/${heavy.id}/runs`, {});
    expect(refused).toMatchObject({ status: 409, body: { code: 'conflict', reason: 'env_vars_do_not_fit' } });
    expect((refused.body as { detail: string }).detail).toContain('env: too_large');
    const after = await snapshotDatabase(t.plane.core.db);
    expect(Object.keys(after).filter((k) => !isDeepStrictEqual(after[k], before[k]))).toEqual([]);

    clock.set(Math.ceil((Date.now() + MINUTE) / MINUTE) * MINUTE + 1_500);
    expect(await t.plane.admin.get(CronTriggerService).tick()).toBeGreaterThanOrEqual(1);
    const fired = await t.plane.core.db.many<{ task_id: string }>(
      "SELECT task_id FROM runs WHERE trigger_kind = 'cron'",
    );
    expect(fired.map((r) => String(r.task_id))).toEqual([light.id]);
    expect(
      log.at('warn').filter((l) => l.includes('cron run not created') && l.includes(heavy.id)),
    ).toHaveLength(1);
  });
});
