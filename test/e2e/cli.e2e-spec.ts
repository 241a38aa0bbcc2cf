/**
 * R-OPS-9: the CLI has `--help` and `help <command>`, an unknown command prints the help and exits 2;
 * the npm scripts run the built tree and build only when a source changed, writing over `dist/`
 * without deleting it (a running server keeps its files).
 */
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { CLI, ROOT, runCli, tempDir } from '../support/entry-points';

const COMMANDS = [
  'migrate',
  'pki',
  'api-key',
  'enroll-token',
  'secret',
  'bundle',
  'backup',
  'openapi',
  'config-docs',
];
const OPTIONS = [
  '--worker <id>',
  '--server-name <dns>',
  '--name <name>',
  '--role admin|viewer',
  '--pattern <glob>',
  '--count <n>',
  '--ttl <duration>',
];

async function cli(...args: string[]) {
  return cliWith({}, ...args);
}

const cliWith = runCli;

describe('the CLI', () => {
  it('--help lists every command with its options and exits 0', async () => {
    const help = await cli('--help');
    expect(help.code).toBe(0);
    expect(help.stderr).toBe('');
    for (const text of [...COMMANDS, ...OPTIONS]) expect(help.stdout).toContain(text);
    // …and the npm scripts that start something, each with its own --help (issue 16 item 2).
    for (const text of ['npm start', 'npm run start:control-plane', 'npm run start:worker', 'npm run bench'])
      expect(help.stdout).toContain(text);
  });

  it('help <command> and <command> --help print that command only', async () => {
    const [one, flag] = await Promise.all([cli('help', 'api-key'), cli('pki', '--help')]);
    expect(one.code).toBe(0);
    expect(one.stdout).toContain('api-key --name <name> --role admin|viewer');
    expect(one.stdout).not.toContain('migrate');
    expect(flag.code).toBe(0);
    expect(flag.stdout).toContain('--server-name <dns>');
    expect(flag.stdout).not.toContain('api-key');
  });

  it('an unknown command or option prints the help on stderr and exits 2, touching nothing', async () => {
    const [unknown, option] = await Promise.all([cli('frobnicate'), cli('api-key', '--colour', 'red')]);
    expect(unknown).toMatchObject({ code: 2, stdout: '' });
    expect(unknown.stderr).toMatch(/^unknown command: frobnicate\n/);
    for (const text of COMMANDS) expect(unknown.stderr).toContain(text);
    expect(option).toMatchObject({ code: 2, stdout: '' });
    expect(option.stderr).toMatch(/--colour/);
    expect(option.stderr).toContain('api-key --name <name>');
  });
});

/** Issue 16 item 5 (ADR 0034): `api-key` says which database it writes to and creates none unasked. */
describe('the CLI and its database', () => {
  let dir: string;
  beforeEach(() => {
    dir = tempDir('ql-cli-db-');
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('api-key without QL_DATABASE_URL and no ./var/ql.sqlite: names the default, refuses (exit 2), creates nothing', () => {
    // The default database is relative to the working directory: run it in an empty one.
    const result = spawnSync(
      process.execPath,
      [
        '-r',
        join(ROOT, 'apps/worker/test-support/swc-register.js'),
        join(ROOT, CLI),
        'api-key',
        '--name',
        'me',
        '--role',
        'admin',
      ],
      { cwd: dir, env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '' }, encoding: 'utf8' },
    );
    expect(result.status).toBe(2);
    expect(result.stdout).toBe(''); // no token
    expect(result.stderr).toContain(
      `database: sqlite:${join(dir, 'var', 'ql.sqlite')} (QL_DATABASE_URL unset: the default)`,
    );
    expect(result.stderr).toContain('--create');
    expect(existsSync(join(dir, 'var'))).toBe(false);
  });

  it('api-key --create creates the SQLite file; once it exists no flag is needed; the database is named on stderr', async () => {
    const url = `sqlite:${join(dir, 'new.sqlite')}`;
    const created = await cliWith(
      { QL_DATABASE_URL: url },
      'api-key',
      '--name',
      'a',
      '--role',
      'admin',
      '--create',
    );
    expect(created.code).toBe(0);
    expect(created.stderr).toBe(
      `database: ${url} (QL_DATABASE_URL)\nStore the token now: it is not shown again.`,
    );
    // stdout is the key as JSON and nothing else, so `npm run -s api-key … | jq -r .token` works.
    expect(JSON.parse(created.stdout)).toMatchObject({ name: 'a', role: 'admin', token: expect.any(String) });
    const again = await cliWith({ QL_DATABASE_URL: url }, 'api-key', '--name', 'b', '--role', 'viewer');
    expect(again.code).toBe(0);
    expect(again.stdout).toContain('"token"');
  });

  it('api-key and migrate on PostgreSQL name the server with the password masked', async () => {
    const url = 'postgres://ql:secret@127.0.0.1:1/nowhere';
    const [key, migrate] = await Promise.all([
      cliWith({ QL_DATABASE_URL: url }, 'api-key', '--name', 'a', '--role', 'admin'),
      cliWith({ QL_DATABASE_URL: url }, 'migrate'),
    ]);
    for (const answer of [key, migrate]) {
      expect(answer.code).not.toBe(0); // nothing listens there
      expect(answer.stderr).toContain('database: postgres://ql:***@127.0.0.1:1/nowhere (QL_DATABASE_URL)');
      expect(answer.stderr).not.toContain('secret');
    }
  });
});

describe('scripts/ensure-built.js (what `npm start`, `npm run api-key` … run first)', () => {
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
    scripts: Record<string, string>;
  };
  let root: string;
  /** A copy of the script in a tree whose build only counts its runs, so the decision is what is tested. */
  const ensure = () => {
    const result = spawnSync(process.execPath, [join(root, 'scripts', 'ensure-built.js')], {
      cwd: root,
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '' },
      encoding: 'utf8',
    });
    expect(result.status).toBe(0);
    return readFileSync(join(root, 'builds'), 'utf8').length;
  };
  const age = (path: string, seconds: number) => {
    const t = Date.now() / 1000 - seconds;
    utimesSync(path, t, t);
  };

  beforeAll(() => {
    root = tempDir('ql-ensure-built-');
    mkdirSync(join(root, 'scripts'));
    cpSync(join(ROOT, 'scripts', 'ensure-built.js'), join(root, 'scripts', 'ensure-built.js'));
    mkdirSync(join(root, 'apps', 'a'), { recursive: true });
    writeFileSync(join(root, 'apps', 'a', 'main.ts'), 'export {};\n');
    writeFileSync(join(root, 'builds'), '');
    const build = `node -e "const fs=require('fs');fs.appendFileSync('builds','x');fs.mkdirSync('dist',{recursive:true});fs.writeFileSync('dist/.built','')"`;
    writeFileSync(join(root, 'package.json'), JSON.stringify({ name: 'x', scripts: { build } }));
    for (const path of ['package.json', 'apps', join('apps', 'a'), join('apps', 'a', 'main.ts')])
      age(join(root, path), 60);
  });
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  it('the npm scripts never delete dist/ and run the CLI after the up-to-date check, not after a build', () => {
    expect(Object.values(pkg.scripts).filter((s) => /rm -rf|rimraf/.test(s))).toEqual([]);
    for (const name of ['start', 'migrate', 'pki', 'api-key', 'enroll-token', 'secret', 'backup', 'config-docs'])
      expect(pkg.scripts[name]).toMatch(/^node scripts\/ensure-built\.js && node dist\//);
    expect(pkg.scripts.build).toMatch(/dist\/\.built/);
  });

  it('builds when dist/ is missing, not again while it is up to date, again after a source changes; dist/ stays', () => {
    expect(ensure()).toBe(1);
    writeFileSync(join(root, 'dist', 'in-use.js'), '// a running server loaded this\n');
    expect(ensure()).toBe(1);
    expect(ensure()).toBe(1);
    writeFileSync(join(root, 'apps', 'a', 'main.ts'), 'export const changed = 1;\n');
    age(join(root, 'apps', 'a', 'main.ts'), -5); // later than the stamp, whatever the clock's resolution
    expect(ensure()).toBe(2);
    expect(readFileSync(join(root, 'dist', 'in-use.js'), 'utf8')).toContain('running server');
  });
});
