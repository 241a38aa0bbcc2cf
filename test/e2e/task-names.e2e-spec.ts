/**
 * Issue 31 item 1: task names as QingLong users write them — Chinese, emoji, accents — stored in NFC
 * on both dialects, unique as one name whatever its Unicode form; a name with a control, bidi or
 * zero-width character is a 400 naming the rule, and nothing is written.
 */
import { snapshotDatabase } from '../support/db-snapshot';
import {
  Dialect,
  TestDatabase,
  TestPlane,
  createTestDatabase,
  createTestPki,
  startTestPlane,
} from '../support/test-plane';

describe.each<Dialect>(['sqlite', 'postgres'])('task names people write (%s)', (dialect) => {
  let db: TestDatabase;
  let pki: Awaited<ReturnType<typeof createTestPki>>;
  let t: TestPlane;

  beforeAll(async () => {
    db = await createTestDatabase(dialect);
    pki = await createTestPki([]);
    t = await startTestPlane(db, pki);
  });
  afterAll(async () => {
    await t?.close();
    await db?.dispose();
    pki?.remove();
  });

  const create = (name: string) =>
    t.admin('POST', '/api/v1/tasks', { name, command: 'node jd_sign.js', runtime: 'node' });

  it('京东签到 and 东东农场 🌾 are tasks; an NFD spelling of a taken name is the same name (409)', async () => {
    for (const name of ['京东签到', '东东农场 🌾 每日浇水', 'Café-Réveil']) {
      const res = await create(name);
      expect({ name, status: res.status }).toEqual({ name, status: 201 });
      const task = await t.admin('GET', `/api/v1/tasks/${(res.body as { id: string }).id}`);
      expect((task.body as { name: string }).name).toBe(name);
    }
    const before = await snapshotDatabase(t.plane.core.db);
    const lookalike = await create('Cafe\u0301-Re\u0301veil'); // e + combining accent: NFC is Café-Réveil
    expect(lookalike).toMatchObject({ status: 409 });
    expect(await snapshotDatabase(t.plane.core.db)).toEqual(before);
  });

  it('a control, bidi or zero-width character, or a space at either end, is a 400 naming the rule; nothing written', async () => {
    const before = await snapshotDatabase(t.plane.core.db);
    for (const [name, rule] of [
      ['京东\u202e签到', 'format_character'],
      ['京东\u200b签到', 'format_character'],
      ['京东\u0007签到', 'control_character'],
      [' 京东签到', 'surrounding_space'],
      ['签'.repeat(129), 'too_long'],
    ] as const) {
      const res = await create(name);
      expect({ name, status: res.status, detail: (res.body as { detail?: string }).detail }).toEqual({
        name,
        status: 400,
        detail: `name: ${rule}`,
      });
    }
    expect(await snapshotDatabase(t.plane.core.db)).toEqual(before);
  });
});
