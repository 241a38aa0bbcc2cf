// Issue 19 item 1 (ADR 0051): `npm run bundle -- push | list | delete`, the real CLI process on a
// real SQLite file: a folder is packed by the CLI itself (the same folder, the same digest), a link
// in it is refused, and a pinned bundle is not deleted.
import { randomBytes } from 'node:crypto';
import { mkdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createIdGenerator, systemClock } from '@ql/contracts';
import { parseTaskSpec } from '@ql/domain';
import { SqlTaskRepository, SqliteDatabase } from '@ql/persistence';
import { runCli, tempDir } from '../support/entry-points';

describe('npm run bundle (the CLI)', () => {
  let dir: string;
  let env: Record<string, string>;
  const cli = (...args: string[]) => runCli(env, ...args);
  const json = (stdout: string) => JSON.parse(stdout) as Record<string, unknown>;

  beforeAll(async () => {
    dir = tempDir('ql-bundle-cli-');
    env = { QL_DATABASE_URL: `sqlite:${join(dir, 'ql.sqlite')}` };
    expect((await cli('migrate')).code).toBe(0);
    mkdirSync(join(dir, 'scripts/lib'), { recursive: true });
    writeFileSync(join(dir, 'scripts/jd_bean.js'), 'console.log("bean")\n');
    writeFileSync(join(dir, 'scripts/lib/util.js'), 'module.exports = 1\n');
    writeFileSync(join(dir, 'sign.py'), 'print("signed")\n');
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('push packs a folder itself: the same folder gives the same digest; one file is a bundle too', async () => {
    const first = await cli('bundle', 'push', join(dir, 'scripts'));
    expect(first.code).toBe(0);
    expect(json(first.stdout)).toMatchObject({
      files: 3,
      created: true,
      digest: expect.stringMatching(/^[0-9a-f]{64}$/),
    });
    const again = await cli('bundle', 'push', join(dir, 'scripts'));
    expect(json(again.stdout)).toMatchObject({ digest: json(first.stdout).digest, created: false });
    const one = await cli('bundle', 'push', join(dir, 'sign.py'));
    expect(json(one.stdout)).toMatchObject({ files: 1, unpackedBytes: 16, created: true });
    const list = await cli('bundle', 'list');
    expect((json(list.stdout).items as { digest: string }[]).map((i) => i.digest).sort()).toEqual(
      [json(first.stdout).digest, json(one.stdout).digest].sort(),
    );
  });

  it('a folder with a link in it is refused (exit 2) and nothing is stored', async () => {
    mkdirSync(join(dir, 'linked'));
    writeFileSync(join(dir, 'linked/a.js'), '1');
    symlinkSync('/etc/passwd', join(dir, 'linked/passwd'));
    const refused = await cli('bundle', 'push', join(dir, 'linked'));
    expect(refused).toMatchObject({ code: 2, stdout: '' });
    expect(refused.stderr).toContain('links are not packed');
    expect((json((await cli('bundle', 'list')).stdout).items as unknown[]).length).toBe(2);
  });

  it('delete: refused while a task pins the bundle (exit 1), then gone; an unknown digest exits 1', async () => {
    const pushed = json((await cli('bundle', 'push', join(dir, 'scripts'))).stdout);
    const db = await SqliteDatabase.open({ path: join(dir, 'ql.sqlite') }, systemClock, false);
    const ids = createIdGenerator();
    const tasks = new SqlTaskRepository(db, ids);
    const task = await tasks.create(
      ids.uuidV7(),
      parseTaskSpec({
        name: 'bean',
        runtime: 'shell',
        command: 'node jd_bean.js',
        bundle: { digest: pushed.digest },
      }),
      { actor: 'test', action: 'task.create', target: 'task' },
    );
    const refused = await cli('bundle', 'delete', pushed.digest as string);
    expect(refused).toMatchObject({ code: 1, stdout: '' });
    expect(refused.stderr).toContain('bundle_pinned');
    await tasks.delete(task.id, { actor: 'test', action: 'task.delete', target: 'task' });
    await db.close();
    const deleted = await cli('bundle', 'delete', pushed.digest as string);
    expect(deleted.code).toBe(0);
    expect(json(deleted.stdout)).toMatchObject({ digest: pushed.digest, deleted: true });
    expect((await cli('bundle', 'delete', pushed.digest as string)).code).toBe(1);
    expect((await cli('bundle', 'frobnicate')).code).toBe(2);
  });

  it('a bundle over QL_BUNDLE_MAX_BYTES is refused (exit 2) naming the limit in bytes and MiB and the setting; nothing stored', async () => {
    const before = (await cli('bundle', 'list')).stdout;
    mkdirSync(join(dir, 'big'));
    // 京东签到日志: random bytes do not shrink when packed.
    writeFileSync(join(dir, 'big/京东签到.log'), randomBytes(4096));
    const refused = await runCli({ ...env, QL_BUNDLE_MAX_BYTES: '2048' }, 'bundle', 'push', join(dir, 'big'));
    expect(refused).toMatchObject({ code: 2, stdout: '' });
    expect(refused.stderr).toMatch(
      /bundle: body: too_large \(the bundle is \d+ bytes packed; the limit is 2048 bytes = 0\.00195 MiB, set by QL_BUNDLE_MAX_BYTES\)/,
    );
    expect((await cli('bundle', 'list')).stdout).toBe(before);
  });
});
