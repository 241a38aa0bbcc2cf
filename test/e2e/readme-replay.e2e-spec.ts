// Size: every replayed step of the README and docs/operations.md with what its user checks, in one
// file: the steps share one copy of the repository, one shell and one control plane, in order.
/**
 * Issue 29 items 7 and 8: the README's and docs/operations.md's commands, replayed as a new user types
 * them, in a copy of the repository (test/support/doc-replay.ts; `npm run docs:replay` runs this file
 * alone). The commands are read from the docs' fenced blocks marked `<!-- replay: <step> -->`, so a
 * changed command is what runs; the user's own edits (their ports, a temp folder for /var/lib and
 * /backups, the values a command printed for a placeholder) are listed per step and each must apply.
 * Every other shell block is marked `<!-- no-replay: <id> -->` and listed below with its reason.
 *
 * One terminal (a bash session) in the copy's folder; `npm start` and `bin/ql-worker` run in terminals
 * of their own and are stopped with Ctrl-C (SIGINT to their process group) where the docs say so.
 * The PostgreSQL steps run beside the rest, in a second terminal with other ports, in the same folder.
 * ADR 0058.
 */
import { X509Certificate } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { freePort, ROOT, tempDir } from '../support/entry-points';
import { quoteIdent, withAdminClient } from '../support/databases';
import {
  blockCommands,
  CommandResult,
  copyRepository,
  DocBlock,
  docBlocks,
  jsonOf,
  SHELL_LANGS,
  ShellSession,
  Terminal,
} from '../support/doc-replay';
import { SUCCEEDED_RUN_EVENTS } from '../support/fixtures';

jest.setTimeout(180_000);

const DOCS = ['README.md', 'docs/operations.md'];

/** Shell blocks that are not replayed here, and why. */
const NOT_REPLAYED: Record<string, string> = {
  'compose-up':
    'Docker Compose: no Docker here; test/e2e/compose.e2e-spec.ts replays the image and compose file',
  'compose-remote-worker':
    'Docker Compose (docker compose run/exec); compose.e2e-spec.ts covers the setup job',
  'docker-build': 'docker build: no Docker here; compose.e2e-spec.ts replays the Dockerfile',
  'kubernetes-apply': 'Kubernetes (kubectl, a registry); test/deploy checks the manifests',
  'kubernetes-secrets': 'Kubernetes (kubectl create secret …)',
  'kubernetes-token': 'Kubernetes (kubectl exec … | kubectl create secret)',
  'kubernetes-upgrade': 'Kubernetes (kubectl delete job, apply)',
  'systemd-enable': 'systemd and sudo (install, systemctl); systemd-unit-process.e2e-spec.ts runs the unit',
  'systemd-install': 'systemd and sudo (useradd, install, systemctl)',
  'replica-origins': 'a setting for a worker beside several replicas on other hosts, not a command',
  'npm-test': 'npm test is what runs this replay (CI: .ci/run)',
  'node-matrix': 'the suite on other Nodes, which runs this replay (CI: .ci/run runs each)',
};

const shellBlocks = () =>
  DOCS.flatMap((doc) => docBlocks(doc, readFileSync(join(ROOT, doc), 'utf8'))).filter((b) =>
    SHELL_LANGS.includes(b.lang),
  );

describe('every shell block of the README and docs/operations.md is replayed or listed as not', () => {
  it('each is marked, each replayed step is one this spec runs, each not replayed has its reason here', () => {
    const blocks = shellBlocks();
    expect(blocks.length).toBeGreaterThan(20);
    const where = (b: DocBlock) => `${b.doc}:${b.line}`;
    expect(blocks.filter((b) => !b.mark).map(where)).toEqual([]);
    const replayed = blocks.filter((b) => b.mark?.replay).map((b) => b.mark!.id);
    expect([...replayed].sort()).toEqual([...STEPS].sort());
    const skipped = new Set(blocks.filter((b) => !b.mark?.replay).map((b) => b.mark!.id));
    expect([...skipped].sort()).toEqual(Object.keys(NOT_REPLAYED).sort());
  });

  it('reads commands as bash does: continuations, open quotes and pipes joined, comments kept apart', () => {
    expect(
      blockCommands(
        [
          '# stop it (Ctrl-C), then:',
          'npm start',
          'curl -d \'{"a": 1,',
          '  "b": 2}\' \\',
          '  http://x   # the user\'s "note"',
          'jq . x |',
          '  cat',
        ].join('\n'),
      ),
    ).toEqual([
      { text: 'npm start', code: 'npm start', comments: ['# stop it (Ctrl-C), then:'] },
      {
        text: 'curl -d \'{"a": 1,\n  "b": 2}\' \\\n  http://x   # the user\'s "note"',
        code: 'curl -d \'{"a": 1,\n  "b": 2}\' \\\n  http://x',
        comments: [],
      },
      { text: 'jq . x |\n  cat', code: 'jq . x |\n  cat', comments: [] },
    ]);
  });
});

/** The steps, in the order they run (the PostgreSQL one beside them). */
const STEPS = [
  'quickstart',
  'first-task',
  'cron',
  'bundles',
  'bundle-tasks',
  'enroll-tokens',
  'enroll-by-hand',
  'second-worker',
  'revoke',
  'secrets',
  'rotate',
  'backup',
  'restore',
  'postgres',
];

interface Check {
  /** Which command of the block (its text as the docs write it). */
  readonly when: RegExp;
  /** Runs before the command (awaits what a user would wait for). */
  readonly before?: () => Promise<void>;
  readonly check?: (result: CommandResult) => void | Promise<void>;
  /** Values for the placeholders of this command only. */
  readonly fill?: () => Record<string, string>;
}

interface Replayer {
  readonly session: ShellSession;
  readonly admin: number;
  readonly ingress: number;
  /** The values the user fills placeholders with: `<token>`, `<task id>`, `qlet_…`. */
  readonly values: Map<string, string>;
  quickstart?: Terminal;
  readonly terminals: Terminal[];
}

/** The JSON a command printed (npm's banner lines before it, without `-s`). */
function printed(stdout: string): Record<string, unknown> {
  const at = stdout.search(/^[{[]/m);
  const value = at >= 0 ? jsonOf(stdout.slice(at)) : undefined;
  if (value === undefined) throw new Error(`no JSON in the output:\n${stdout}`);
  return value as Record<string, unknown>;
}

describe('the docs replayed as a new user types them', () => {
  let tmp: string;
  let repo: string;
  let main: Replayer;
  let pg: Replayer;
  let pgDatabase: string;
  let pgStep: Promise<void> | undefined;
  const pgAdmin = new URL(process.env.QL_TEST_PG_ADMIN_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres');

  /** The user's ports (QL_ADMIN_PORT, QL_INGRESS_PORT) where the docs write 8080 and 8443. */
  const portEdits = (r: Replayer): [string, string][] => [
    ['127.0.0.1:8080', `127.0.0.1:${r.admin}`],
    ['localhost:8080', `localhost:${r.admin}`],
    ['https://control-plane:8443', `https://127.0.0.1:${r.ingress}`],
  ];

  const block = (id: string) => {
    const found = shellBlocks().filter((b) => b.mark?.replay && b.mark.id === id);
    expect(found).toHaveLength(1);
    return found[0]!;
  };

  async function newReplayer(): Promise<Replayer> {
    const admin = await freePort();
    const ingress = await freePort();
    const session = new ShellSession(repo, {
      PATH: process.env.PATH ?? '',
      HOME: join(tmp, 'home'),
      LANG: 'C.UTF-8',
      npm_config_update_notifier: 'false',
      npm_config_fund: 'false',
      QL_ADMIN_PORT: String(admin),
      QL_INGRESS_PORT: String(ingress),
      // Short timings, settings the README lists: a worker hears a revocation at its next heartbeat.
      QL_WORKER_HEARTBEAT_MS: '500',
      QL_REVOCATION_CACHE_MS: '0',
    });
    return { session, admin, ingress, values: new Map(), terminals: [] };
  }

  /** An admin API call as the user's key (the checks a user makes in the console or with curl). */
  async function api(r: Replayer, path: string, init: RequestInit = {}) {
    const res = await fetch(`http://127.0.0.1:${r.admin}${path}`, {
      ...init,
      headers: {
        authorization: `Bearer ${r.values.get('<token>')}`,
        ...(init.body ? { 'content-type': 'application/json' } : {}),
        ...(init.headers as Record<string, string>),
      },
    });
    return {
      status: res.status,
      body: (await res.json()) as Record<string, unknown> & { items?: unknown[] },
    };
  }

  /** A run's end, awaited on the admin API's log tail (long poll), then its detail and output. */
  async function runEnded(r: Replayer, runId: string) {
    for (let after = 0; ;) {
      const page = await api(r, `/api/v1/runs/${runId}/logs?after=${after}&wait=20`);
      expect(page.status).toBe(200);
      if (page.body.runEnded) break;
      after = page.body.nextAfter as number;
    }
    const detail = (await api(r, `/api/v1/runs/${runId}`)).body;
    const logs = (await api(r, `/api/v1/runs/${runId}/logs`)).body.items as {
      stream: string;
      text: string;
    }[];
    return { detail, text: logs.map((l) => l.text).join('') };
  }

  /** Runs task `taskId` once now, as the console's "run now" does, and awaits its end. */
  async function runTask(r: Replayer, taskId: string) {
    const created = await api(r, `/api/v1/tasks/${taskId}/runs`, {
      method: 'POST',
      headers: { 'idempotency-key': `replay-${Date.now()}-${Math.random()}` },
    });
    expect(created.status).toBe(201);
    return runEnded(r, (created.body.run as { id: string }).id);
  }

  /**
   * Ctrl-C on a quickstart: npm ends by the signal as a terminal shows it (^C), the quickstart stops
   * its worker (offline) and its control plane, and nothing is left writing to the terminal.
   */
  async function stopped(terminal: Terminal) {
    terminal.interrupt();
    expect(await terminal.closed).toEqual({ code: null, signal: 'SIGINT' });
    expect(terminal.lines.map((l) => l.msg)).toEqual(expect.arrayContaining(['worker offline']));
    expect(terminal.lines.filter((l) => l.level === 'error')).toEqual([]);
  }

  /** Starts a long-running command in a terminal of its own; `npm start` replaces a running one. */
  async function startTerminal(r: Replayer, text: string, comments: string[]): Promise<Terminal> {
    const isQuickstart = /\bnpm start\b/.test(text);
    if (isQuickstart && r.quickstart?.running) {
      // The docs say to stop it first.
      expect(comments.join(' ')).toMatch(/Ctrl-C|stop the control plane/);
      await stopped(r.quickstart);
    }
    const terminal = new Terminal(text, repo, await r.session.environment());
    r.terminals.push(terminal);
    if (isQuickstart) r.quickstart = terminal;
    await terminal.until('its worker registered', (l) => l.msg === 'worker registered');
    return terminal;
  }

  /**
   * Runs step `id`'s block: each command with the user's `edits` (each must apply) and the port
   * edits, placeholders filled from what earlier commands printed, long-running ones in terminals;
   * each command's check, else exit 0 and no problem answer. Every check must meet its command.
   */
  async function replay(
    r: Replayer,
    id: string,
    { edits = [], checks = [] }: { edits?: [string, string][]; checks?: Check[] } = {},
  ) {
    const used = new Set<string>();
    const met = new Set<Check>();
    let comments: string[] = [];
    for (const command of blockCommands(block(id).body)) {
      // What bash runs: the command without its comments (the placeholders a comment names are not typed).
      let text = command.code;
      for (const [from, to] of edits)
        if (text.includes(from)) {
          text = text.split(from).join(to);
          used.add(from);
        }
      for (const [from, to] of portEdits(r)) text = text.split(from).join(to);
      const check = checks.find((c) => c.when.test(command.text));
      const values = new Map([...r.values, ...Object.entries(check?.fill?.() ?? {})]);
      text = text.replace(/<[a-z][a-z ]*>|qlet_…/g, (placeholder) => {
        const value = values.get(placeholder);
        if (value === undefined) throw new Error(`step ${id}: no value for ${placeholder} in\n${text}`);
        return value;
      });
      comments = [...comments, ...command.comments];
      if (check) met.add(check);
      await check?.before?.();
      if (/\bnpm start$|bin\/ql-worker$/.test(command.code)) {
        await startTerminal(r, text, comments);
        comments = [];
        continue;
      }
      const result = await r.session.run(text);
      if (check?.check) await check.check(result);
      else {
        expect({ command: text, code: result.code, stderr: result.stderr }).toMatchObject({ code: 0 });
        // A problem answer (curl exits 0 on it) is a failure the user would see.
        const answer = jsonOf(result.stdout) as { status?: unknown } | undefined;
        const status = typeof answer?.status === 'number' ? answer.status : 200;
        expect({ command: text, answer: status < 400 ? 'not a problem' : answer }).toEqual({
          command: text,
          answer: 'not a problem',
        });
      }
    }
    expect(edits.map(([from]) => from).filter((from) => !used.has(from))).toEqual([]);
    expect(checks.filter((c) => !met.has(c)).map((c) => String(c.when))).toEqual([]);
  }

  const ok = (check: (result: CommandResult) => void | Promise<void>) => async (result: CommandResult) => {
    expect({ command: result.command, code: result.code, stderr: result.stderr }).toMatchObject({ code: 0 });
    await check(result);
  };

  beforeAll(async () => {
    tmp = tempDir('ql-replay-');
    repo = join(tmp, 'qinglong-remote-worker');
    mkdirSync(join(tmp, 'home'));
    copyRepository(ROOT, repo);
    main = await newReplayer();
    pg = await newReplayer();
    pgDatabase = `ql_replay_${Date.now().toString(36)}`;
  });
  afterAll(async () => {
    await pgStep?.catch(() => undefined);
    await Promise.all([...(main?.terminals ?? []), ...(pg?.terminals ?? [])].map((t) => t.stop()));
    await Promise.all([main?.session.close(), pg?.session.close()]);
    await withAdminClient(pgAdmin.href, (client) =>
      client.query(`DROP DATABASE IF EXISTS ${quoteIdent(pgDatabase)} WITH (FORCE)`),
    ).catch(() => undefined);
    rmSync(tmp, { recursive: true, force: true });
  });

  it('quickstart: npm start (node_modules linked instead of npm ci) starts the plane and worker-1', async () => {
    await replay(main, 'quickstart', { edits: [['npm ci && npm start', 'npm start']] });
    expect(main.quickstart!.lines.map((l) => l.msg)).toContain(
      `quickstart: web console at http://127.0.0.1:${main.admin}/; sign in with an API key: npm run api-key -- --name me --role admin`,
    );
    expect(existsSync(join(repo, 'var/ql.sqlite'))).toBe(true);
    // The PostgreSQL steps go on beside the others, in the same folder (its dev PKI is made now).
    pgStep = postgresStep();
    pgStep.catch(() => undefined);
  });

  it('first-task: an API key, a task, its run and output, the worker views, drain and resume', async () => {
    let runId = '';
    await replay(main, 'first-task', {
      checks: [
        {
          when: /^npm run api-key/,
          check: ok(({ stdout }) => {
            expect(printed(stdout)).toMatchObject({ role: 'admin', token: expect.any(String) });
            main.values.set('<token>', printed(stdout).token as string);
          }),
        },
        {
          when: /readyz/,
          check: ok(({ stdout }) => expect(jsonOf(stdout)).toMatchObject({ status: 'ok' })),
        },
        {
          when: /api\/v1\/workers #/,
          check: ok(({ stdout }) =>
            expect(jsonOf(stdout)).toMatchObject({ items: [{ workerId: 'worker-1', status: 'online' }] }),
          ),
        },
        {
          when: /"name":"hello"/,
          check: ok(({ stdout }) => {
            const task = jsonOf(stdout) as { id: string; name: string };
            expect(task.name).toBe('hello');
            main.values.set('<task id>', task.id);
          }),
        },
        {
          when: /Idempotency-Key/,
          check: ok(({ stdout }) => {
            const answer = jsonOf(stdout) as { created: boolean; run: { id: string } };
            expect(answer.created).toBe(true);
            runId = answer.run.id;
            main.values.set('<run id>', runId);
          }),
        },
        {
          when: /runs\/<run id>$/,
          // "a second later": the run's end, awaited on the log tail.
          before: async () => void (await runEnded(main, runId)),
          check: ok(({ stdout }) => {
            const run = jsonOf(stdout) as { status: string; attempts: unknown[]; events: { type: string }[] };
            expect(run).toMatchObject({ status: 'succeeded', attempts: [{ workerId: 'worker-1' }] });
            expect(run.events.map((e) => e.type)).toEqual(SUCCEEDED_RUN_EVENTS);
          }),
        },
        {
          when: /logs$/,
          check: ok(({ stdout }) => {
            const items = (jsonOf(stdout) as { items: { stream: string; text: string }[] }).items;
            expect(items.map(({ stream, text }) => ({ stream, text }))).toEqual([
              { stream: 'stdout', text: `hello from ${hostname()}\n` },
              { stream: 'stderr', text: 'done\n' },
            ]);
          }),
        },
        {
          when: /wait=20/,
          check: ok(({ stdout }) => expect(jsonOf(stdout)).toMatchObject({ runEnded: true })),
        },
        {
          when: /workers\/worker-1$/,
          check: ok(({ stdout }) => expect(jsonOf(stdout)).toMatchObject({ status: 'online' })),
        },
        {
          when: /runs\?workerId=worker-1/,
          check: ok(({ stdout }) => expect(jsonOf(stdout)).toMatchObject({ items: [{ id: runId }] })),
        },
      ],
    });
    expect((await api(main, '/api/v1/workers/worker-1')).body).toMatchObject({ status: 'online' });
  });

  it("cron: a task in QingLong's six-field form and a time zone", async () => {
    await replay(main, 'cron', {
      checks: [
        {
          when: /sign-in/,
          check: ok(({ stdout }) =>
            expect(jsonOf(stdout)).toMatchObject({
              name: 'sign-in',
              spec: { cron: '0 0 8 * * *', timezone: 'Asia/Shanghai' },
            }),
          ),
        },
      ],
    });
  });

  it("bundles: the user's scripts pushed as a folder and as one file, listed, one deleted", async () => {
    // The user's own scripts (QingLong's kind), where the README puts them.
    writeFileSync(
      join(repo, 'scripts/jd_bean.js'),
      "console.log('京豆 +5，来自' + require('./lib/jd').shop);\n",
    );
    mkdirSync(join(repo, 'scripts/lib'));
    writeFileSync(
      join(repo, 'scripts/lib/jd.js'),
      "exports.shop = '京东';\nexports.assets = () => console.log('资产：京豆 1024');\n",
    );
    writeFileSync(join(repo, 'scripts/jd_sign.py'), "def main():\n    print('签到成功：京豆 +5')\n");
    writeFileSync(join(repo, 'sign.py'), "print('签到')\n");
    let signDigest = '';
    await replay(main, 'bundles', {
      checks: [
        {
          when: /push \.\/scripts/,
          check: ok(({ stdout }) => {
            main.values.set('<digest>', printed(stdout).digest as string);
          }),
        },
        {
          when: /push \.\/sign\.py/,
          check: ok(({ stdout }) => {
            expect(printed(stdout)).toMatchObject({ files: 1, created: true });
            signDigest = printed(stdout).digest as string;
          }),
        },
        {
          when: /bundle -- list/,
          check: ok(({ stdout }) =>
            expect((printed(stdout).items as { digest: string }[]).map((b) => b.digest).sort()).toEqual(
              [main.values.get('<digest>'), signDigest].sort(),
            ),
          ),
        },
        {
          // The user deletes the one-file bundle; the folder's is pinned by the next step's tasks.
          when: /bundle -- delete/,
          fill: () => ({ '<digest>': signDigest }),
          check: ok(({ stdout }) =>
            expect(printed(stdout)).toMatchObject({ digest: signDigest, deleted: true }),
          ),
        },
      ],
    });
  });

  it('bundle-tasks: a shell, a node and a python task of the bundle run and print their Chinese output', async () => {
    const tasks: string[] = [];
    const created = ok(({ stdout }) => {
      const task = jsonOf(stdout) as { id: string };
      expect(task).toMatchObject({
        id: expect.any(String),
        spec: { bundle: { digest: main.values.get('<digest>') } },
      });
      tasks.push(task.id);
    });
    await replay(main, 'bundle-tasks', {
      checks: [
        { when: /"jd bean"/, check: created },
        { when: /"jd assets"/, check: created },
        { when: /"jd sign"/, check: created },
      ],
    });
    const runs = [];
    for (const task of tasks) runs.push(await runTask(main, task));
    expect(runs.map((r) => ({ status: r.detail.status, text: r.text }))).toEqual([
      { status: 'succeeded', text: '京豆 +5，来自京东\n' },
      { status: 'succeeded', text: '资产：京豆 1024\n' },
      { status: 'succeeded', text: '签到成功：京豆 +5\n' },
    ]);
  });

  it('enroll-tokens: tokens made, listed without a token, one revoked', async () => {
    await replay(main, 'enroll-tokens', {
      checks: [
        {
          when: /--worker router-1 /,
          check: ok(({ stdout }) => {
            expect(printed(stdout)).toMatchObject({ token: expect.stringMatching(/^qlet_/) });
            main.values.set('<id>', printed(stdout).id as string);
          }),
        },
        { when: /jq -r \.token/, check: ok(({ stdout }) => expect(stdout).toMatch(/^qlet_\S+\n$/)) },
        {
          when: /--out router-3\.token/,
          check: ok(() => {
            expect(statSync(join(repo, 'router-3.token')).mode & 0o777).toBe(0o600);
            expect(readFileSync(join(repo, 'router-3.token'), 'utf8')).toMatch(/^qlet_/);
          }),
        },
        {
          when: /enroll-token -- list/,
          check: ok(({ stdout }) => {
            expect(stdout).not.toContain('qlet_');
            expect(printed(stdout).items).toEqual(
              expect.arrayContaining([expect.objectContaining({ id: main.values.get('<id>') })]),
            );
          }),
        },
      ],
    });
    const tokens = (await api(main, '/api/v1/enrollment-tokens')).body.items as {
      id: string;
      status: string;
    }[];
    expect(tokens.find((t) => t.id === main.values.get('<id>'))).toMatchObject({ status: 'revoked' });
  });

  it('enroll-by-hand: a CSR and a token to the enrollment route give a certificate for router-1', async () => {
    await replay(main, 'enroll-by-hand', {
      edits: [['--cacert ca.crt', '--cacert var/pki/ca.crt']],
      checks: [
        {
          when: /> worker\.crt/,
          check: ok(() => {
            const cert = new X509Certificate(readFileSync(join(repo, 'worker.crt')));
            expect(cert.subject).toBe('CN=router-1');
            expect(cert.subjectAltName).toContain('/worker/router-1');
          }),
        },
      ],
    });
  });

  /** router-1's command on its machine (the second-worker block), and where its certificate goes. */
  const machine = () => join(tmp, 'router-1');
  const machineEdits = (): [string, string][] => [
    ['QL_WORKER_TLS_CA=ca.crt', 'QL_WORKER_TLS_CA=var/pki/ca.crt'],
    ['/var/lib/qinglong/', `${machine()}/`],
  ];
  const fingerprintOf = (file: string) =>
    new X509Certificate(readFileSync(file)).fingerprint256.replace(/:/g, '').toLowerCase();

  it("second-worker: a token, then the machine's command: router-1 enrolls, registers and is listed", async () => {
    await replay(main, 'second-worker', {
      edits: machineEdits(),
      checks: [
        {
          when: /enroll-token -- create --worker router-1 \| jq/,
          check: ok(({ stdout }) => {
            main.values.set('qlet_…', stdout.trim());
          }),
        },
      ],
    });
    const cert = join(machine(), 'tls/worker.crt');
    expect(statSync(join(machine(), 'tls/worker.key')).mode & 0o777).toBe(0o600);
    expect(readdirSync(machine())).toEqual(expect.arrayContaining(['journal', 'tls']));
    expect((await api(main, '/api/v1/workers/router-1')).body).toMatchObject({
      status: 'online',
      certificateFingerprint: fingerprintOf(cert),
    });
  });

  it('revoke: router-1 stops and exits 11; a new token and the same command enroll it again', async () => {
    const router = main.terminals.find((t) => /bin\/ql-worker\b/.test(t.command) && t.running)!;
    const before = fingerprintOf(join(machine(), 'tls/worker.crt'));
    await replay(main, 'revoke', {
      checks: [
        {
          when: /revoke/,
          check: ok(({ stdout }) => expect(jsonOf(stdout)).toMatchObject({ workerId: 'router-1' })),
        },
        {
          when: /jq -r \.token/,
          check: ok(({ stdout }) => {
            main.values.set('qlet_…', stdout.trim());
          }),
        },
      ],
    });
    expect(await router.exited).toEqual({ code: 11, signal: null });
    expect(existsSync(join(machine(), 'tls/worker.crt.revoked'))).toBe(true);
    // The machine's command again, as the docs write it, with the new token.
    const command = blockCommands(block('second-worker').body).find((c) => /bin\/ql-worker$/.test(c.code))!;
    let text = command.text;
    for (const [from, to] of [...machineEdits(), ...portEdits(main)]) text = text.split(from).join(to);
    const again = await startTerminal(main, text.replace('qlet_…', main.values.get('qlet_…')!), []);
    expect(again.lines.some((l) => l.msg === 'worker certificate enrolled')).toBe(true);
    const after = fingerprintOf(join(machine(), 'tls/worker.crt'));
    expect(after).not.toBe(before);
    expect((await api(main, '/api/v1/workers/router-1')).body).toMatchObject({
      status: 'online',
      certificateFingerprint: after,
    });
  });

  let secretTask = '';
  const secretRunPrints2 = async () => {
    const run = await runTask(main, secretTask);
    expect({ status: run.detail.status, text: run.text }).toEqual({ status: 'succeeded', text: '2\n' });
  };

  it('secrets: the key, a restart, two secrets set and listed, a task that maps them runs', async () => {
    await replay(main, 'secrets', {
      checks: [
        {
          when: /secret -- set jd-cookie-1/,
          check: ok(({ stdout }) =>
            expect(printed(stdout)).toMatchObject({ name: 'jd-cookie-1', keyId: 'primary' }),
          ),
        },
        {
          when: /secret -- list/,
          check: ok(({ stdout }) => {
            expect(stdout).not.toMatch(/AAA|BBB/);
            expect((printed(stdout).items as { name: string }[]).map((s) => s.name)).toEqual([
              'jd-cookie-1',
              'jd-cookie-2',
            ]);
          }),
        },
        {
          when: /secretEnv/,
          check: ok(({ stdout }) => {
            secretTask = (jsonOf(stdout) as { id: string }).id;
          }),
        },
      ],
    });
    await secretRunPrints2();
  });

  it('rotate: the three steps, each restart with Ctrl-C; the secrets still open after each', async () => {
    await replay(main, 'rotate', {
      checks: [
        {
          when: /secret -- rotate/,
          before: secretRunPrints2,
          check: ok(async () => {
            const secrets = (await api(main, '/api/v1/secrets')).body.items as { keyId: string }[];
            expect(secrets.map((s) => s.keyId)).toEqual(['k2', 'k2']);
          }),
        },
        { when: /^unset/, before: secretRunPrints2 },
      ],
    });
    await secretRunPrints2();
  });

  let today = '';
  it('backup: npm run -s backup while the plane runs', async () => {
    mkdirSync(join(tmp, 'backups'));
    today = (await main.session.run('date +%F')).stdout.trim();
    await replay(main, 'backup', {
      edits: [['/backups/', `${tmp}/backups/`]],
      checks: [
        {
          when: /backup -- --out/,
          check: ok(({ stdout }) =>
            expect(jsonOf(stdout)).toMatchObject({ file: join(tmp, 'backups', `ql-${today}.sqlite`) }),
          ),
        },
      ],
    });
  });

  it('restore: Ctrl-C, the file moved aside, the copy in its place, npm start: the tasks of the backup, not later ones', async () => {
    const later = await api(main, '/api/v1/tasks', {
      method: 'POST',
      body: JSON.stringify({ name: '备份之后的任务', command: 'echo 晚了', runtime: 'shell' }),
    });
    expect(later.status).toBe(201);
    await replay(main, 'restore', {
      edits: [['/backups/ql-2026-12-07.sqlite', `${tmp}/backups/ql-${today}.sqlite`]],
    });
    expect(readdirSync(join(repo, 'var/before-restore'))).toContain('ql.sqlite');
    const names = ((await api(main, '/api/v1/tasks?limit=200')).body.items as { name: string }[]).map(
      (t) => t.name,
    );
    expect(names.sort()).toEqual(['hello', 'jd assets', 'jd bean', 'jd sign', 'jd-bean', 'sign-in'].sort());
    await secretRunPrints2();
  });

  /** README "Several replicas on PostgreSQL", in a second terminal with its own ports, same folder. */
  async function postgresStep(): Promise<void> {
    // The test server (test/support/postgres-server.ts) is the user's: its address, user and
    // password where the README writes 127.0.0.1:5432 and postgres, and a database name of this run's.
    const server = `${pgAdmin.hostname}:${pgAdmin.port || '5432'}`;
    const user = pgAdmin.password ? `${pgAdmin.username}:${pgAdmin.password}` : pgAdmin.username;
    if (pgAdmin.password) await pg.session.run(`export PGPASSWORD='${decodeURIComponent(pgAdmin.password)}'`);
    const createdb = await pg.session.run('command -v createdb');
    if (createdb.code !== 0)
      throw new Error(
        "the README's PostgreSQL commands need createdb, PostgreSQL's client tools (apt-get install postgresql-client)",
      );
    await replay(pg, 'postgres', {
      edits: [
        ['-U postgres ql', `-U ${pgAdmin.username} -p ${pgAdmin.port || '5432'} ${pgDatabase}`],
        ['-h 127.0.0.1', `-h ${pgAdmin.hostname}`],
        ['postgres@127.0.0.1:5432/ql', `${user}@${server}/${pgDatabase}`],
      ],
      checks: [
        {
          when: /api-key/,
          check: ok(({ stdout, stderr }) => {
            expect(stderr).toMatch(
              new RegExp(
                `database: postgres://${pgAdmin.username}(:\\S+)?@${server}/${pgDatabase} \\(QL_DATABASE_URL\\)`,
              ),
            );
            pg.values.set('<token>', printed(stdout).token as string);
          }),
        },
      ],
    });
    // Issue 29 item 8: its worker-1 enrolled with this plane, in a state folder of its own.
    expect(pg.quickstart!.lines.map((l) => l.msg)).toContain('quickstart: worker-1 enrolls with a new token');
    const state = readdirSync(join(repo, 'var/worker')).find((name) => name.startsWith('worker-1@'))!;
    expect(state).toMatch(/^worker-1@[0-9a-f]{12}$/);
    expect((await api(pg, '/api/v1/workers/worker-1')).body).toMatchObject({
      status: 'online',
      certificateFingerprint: fingerprintOf(join(repo, 'var/worker', state, 'tls/worker.crt')),
    });
    await stopped(pg.quickstart!);
  }

  it('postgres: createdb, migrate, a cluster-control quickstart in the same folder and its first key', async () => {
    await pgStep;
  });
});
