// Issue 29 items 1-2 (ADR 0051), end to end on both dialects with real worker processes: a bundle's
// helper modules are found by a shell, a node and a python task's inline command, on a worker whose
// QL_WORKER_WORK_DIR is relative (the default form) and on one whose is absolute; and the README's
// bundle commands, replayed as written (the CLI pushes the folder, the task is created with the
// README's own body), run.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { runCli, tempDir } from '../support/entry-points';
import { pushBundle } from '../support/bundle-fixtures';
import { RemoteRunHarness } from '../support/remote-run-harness';
import type { Dialect } from '../support/test-plane';

jest.setTimeout(180_000);

const ROOT = join(__dirname, '../..');

/** The README's "Scripts and bundles" section: its `npm run bundle` commands and its task body. */
function readmeBundleSteps() {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const section = readme.slice(readme.indexOf('## Scripts and bundles'));
  const text = section.slice(0, section.indexOf('\n## ', 1));
  const commands = [...text.matchAll(/^npm run bundle -- (.+?)(?:\s+#.*)?$/gm)].map((m) => m[1]!.split(' '));
  const curl = /curl -s -X POST localhost:8080(\/api\/v1\/tasks) [^\n]*\\\n\s+-d '([^']+)'/.exec(text);
  if (!curl || commands.length === 0) throw new Error('the README has no bundle commands and task body');
  return { commands, taskPath: curl[1]!, taskBody: curl[2]! };
}

describe.each<Dialect>(['sqlite', 'postgres'])('bundle scripts on remote workers (%s)', (dialect) => {
  let h: RemoteRunHarness;

  const runTask = async (spec: Record<string, unknown>) => {
    const run = await h.untilRunEnds(await h.trigger(await h.createTask({ timeoutMs: 60_000, ...spec })));
    return {
      status: run.status,
      stdout: await h.output(run.id, 'stdout'),
      stderr: await h.output(run.id, 'stderr'),
    };
  };

  beforeAll(async () => {
    h = await RemoteRunHarness.start(dialect, ['worker-abs', 'worker-rel']);
    const abs = h.startWorker('worker-abs', {
      env: { QL_WORKER_LABELS: 'workdir=absolute', QL_WORKER_BUNDLE_CACHE_DIR: h.folder('abs-cache') },
    });
    // The worker starts in the repository root: its work folder named relative to that.
    const rel = h.startWorker('worker-rel', {
      workDir: relative(ROOT, h.folder('rel-runs')),
      env: { QL_WORKER_LABELS: 'workdir=relative', QL_WORKER_BUNDLE_CACHE_DIR: h.folder('rel-cache') },
    });
    await h.untilOnline(abs);
    await h.untilOnline(rel);
  });
  afterAll(async () => {
    await h?.close();
  });

  it.each(['absolute', 'relative'])(
    "shell, node and python commands import the bundle's own modules from its working folder (%s work folder)",
    async (workdirForm) => {
      const digest = await pushBundle(h.t, {
        'jobs/lib/greet.sh': 'greet() { echo "你好，$1"; }\n',
        'jobs/lib/greet.js': "exports.greet = (who) => '你好，' + who;\n",
        'jobs/helper.py': "def greet(who):\n    return '你好，' + who\n",
        'README.md': '不在工作目录里\n',
      });
      const placement = { required: { labels: { workdir: workdirForm } } };
      const bundle = { digest, workdir: 'jobs' };
      const commands = {
        shell: '. ./lib/greet.sh && greet 京东 && test ! -e README.md',
        node: "console.log(require('./lib/greet.js').greet('节点'))",
        python: "import helper\nprint(helper.greet('蟒蛇'))",
      };
      const results = [];
      for (const [runtime, command] of Object.entries(commands))
        results.push({ runtime, ...(await runTask({ runtime, command, bundle, placement })) });
      expect(results).toEqual([
        { runtime: 'shell', status: 'succeeded', stdout: '你好，京东\n', stderr: '' },
        { runtime: 'node', status: 'succeeded', stdout: '你好，节点\n', stderr: '' },
        { runtime: 'python', status: 'succeeded', stdout: '你好，蟒蛇\n', stderr: '' },
      ]);
    },
  );

  it("the README's bundle commands, replayed as written, push the folder and run its task", async () => {
    const { commands, taskPath, taskBody } = readmeBundleSteps();
    const dir = tempDir('ql-readme-bundle-');
    mkdirSync(join(dir, 'scripts'));
    writeFileSync(join(dir, 'scripts/jd_bean.js'), "console.log('京东豆 +10')\n");
    writeFileSync(join(dir, 'sign.py'), "print('签到成功')\n");
    const env = { QL_DATABASE_URL: h.databaseUrl };
    // `npm run bundle -- …` is the CLI command package.json's script names; the README's folder
    // arguments are relative to where it is typed: here, `dir`.
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
      scripts: Record<string, string>;
    };
    const script = pkg.scripts.bundle!;
    const command = script.slice(script.indexOf('cli.js ') + 'cli.js '.length).split(' ');
    const cli = (args: string[]) =>
      runCli(env, ...command, ...args.map((a) => (a.startsWith('./') ? join(dir, a) : a)));
    const pushScripts = commands.find((c) => c.join(' ') === 'push ./scripts');
    expect(commands.map((c) => c[0])).toEqual(['push', 'push', 'list', 'delete']);
    const pushed = JSON.parse((await cli(pushScripts!)).stdout) as { digest: string };
    for (const command of commands.filter((c) => c !== pushScripts && c[0] !== 'delete'))
      expect((await cli(command)).code).toBe(0);
    const created = await h.t.admin(
      'POST',
      taskPath,
      JSON.parse(taskBody.replace('<digest>', pushed.digest)),
    );
    expect({ status: created.status, body: created.raw }).toMatchObject({ status: 201 });
    const run = await h.untilRunEnds(await h.trigger((created.body as { id: string }).id));
    expect({ status: run.status, stdout: await h.output(run.id, 'stdout') }).toEqual({
      status: 'succeeded',
      stdout: '京东豆 +10\n',
    });
    // `delete <digest>`, as its comment says: refused while the task pins it.
    const remove = commands.find((c) => c[0] === 'delete')!;
    const refused = await cli(remove.map((a) => (a === '<digest>' ? pushed.digest : a)));
    expect({ code: refused.code, pinned: refused.stderr.includes('bundle_pinned') }).toEqual({
      code: 1,
      pinned: true,
    });
  });
});
