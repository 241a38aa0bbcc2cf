/**
 * Issue 16 item 2 (ADR 0034): `npm run <cmd> -- --help`, as the README recommends, never starts or
 * writes anything. Every entry point answers --help/-h with its usage (exit 0) and refuses an unknown
 * option with a clear message (exit 2), before it binds a port, dials a control plane, creates a
 * database or PKI, or writes a file.
 */
import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { AddressInfo, Socket, createServer } from 'node:net';
import { join } from 'node:path';
import {
  CLI,
  CONTROL_PLANE,
  EntryPoint,
  QUICKSTART,
  ROOT,
  WORKER,
  freePort,
  portIsFree,
  tempDir,
} from '../support/entry-points';

const BENCH = 'bench/run.ts';

async function spawnEntry(file: string, env: Record<string, string>, args: string[]) {
  const p = new EntryPoint(file, env, args);
  const exit = await p.exited;
  const stdout = p.messages().map((m) => m.replace(/^\(not JSON\) /, ''));
  return { code: exit.code, stdout: stdout.join('\n'), stderr: p.stderr.join('\n') };
}

describe('every entry point answers --help and refuses unknown options without side effects', () => {
  let dir: string;
  let env: Record<string, string>;
  let ports: { admin: number; ingress: number };
  /** A listener where the worker would dial its control plane: it must see no connection. */
  const dials: Socket[] = [];
  const plane = createServer((socket) => dials.push(socket.destroy()));

  beforeAll(async () => {
    dir = tempDir('ql-entry-help-');
    ports = { admin: await freePort(), ingress: await freePort() };
    await new Promise<void>((done) => plane.listen(0, '127.0.0.1', done));
    env = {
      QL_ADMIN_PORT: String(ports.admin),
      QL_INGRESS_PORT: String(ports.ingress),
      QL_DATABASE_URL: `sqlite:${join(dir, 'ql.sqlite')}`,
      QL_DEV_PKI_DIR: join(dir, 'pki'),
      QL_WORKER_CONTROL_PLANE_URL: `https://127.0.0.1:${(plane.address() as AddressInfo).port}`,
      QL_WORKER_JOURNAL_DIR: join(dir, 'journal'),
      QL_WORKER_WORK_DIR: join(dir, 'runs'),
    };
  });
  afterAll(() => plane.close());

  const entries: [string, string, Record<string, string>][] = [
    ['npm start', QUICKSTART, {}],
    ['npm run start:control-plane', CONTROL_PLANE, {}],
    ['npm run start:worker', WORKER, { QL_PROFILE: 'worker' }],
    ['npm run bench', BENCH, {}],
  ];

  it.each(entries)('%s -- --help / -h: its usage on stdout, exit 0', async (_name, file, extra) => {
    for (const flag of ['--help', '-h']) {
      const answer = await spawnEntry(file, { ...env, ...extra }, [flag]);
      expect(answer).toMatchObject({ code: 0, stderr: '' });
      expect(answer.stdout).toMatch(/^usage: /);
    }
  });

  it.each(entries)(
    '%s -- --frobnicate: "unknown option" and the usage on stderr, exit 2',
    async (_name, file, extra) => {
      const answer = await spawnEntry(file, { ...env, ...extra }, ['--frobnicate']);
      expect(answer).toMatchObject({ code: 2, stdout: '' });
      expect(answer.stderr).toMatch(/^unknown option: --frobnicate\n/);
      expect(answer.stderr).toContain('usage: ');
      expect(answer.stderr).not.toMatch(/^\s+at /m); // no stack trace
    },
  );

  it('the worker journal command answers --help with its usage, exit 0', async () => {
    const answer = await spawnEntry(WORKER, { ...env, QL_PROFILE: 'worker' }, ['journal', '--help']);
    expect(answer).toMatchObject({ code: 0, stderr: '' });
    expect(answer.stdout).toContain('worker journal resolve <offer id>');
  });

  it('nothing was started or written: ports free, no database, PKI or journal, no dial to the control plane', async () => {
    expect(await Promise.all([portIsFree(ports.admin), portIsFree(ports.ingress)])).toEqual([true, true]);
    expect(readdirSync(dir)).toEqual([]);
    expect(dials).toHaveLength(0);
  });

  it('npm run openapi -- --help prints the help and leaves the document as it was', async () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
      scripts: Record<string, string>;
    };
    // The CLI writes the file itself: a shell redirect would empty it before the CLI even runs.
    expect(pkg.scripts.openapi).toMatch(/cli\.js openapi --out docs\/openapi\.json$/);
    const copy = join(tempDir('ql-openapi-'), 'openapi.json');
    writeFileSync(copy, readFileSync(join(ROOT, 'docs', 'openapi.json')));
    const answer = await spawnEntry(CLI, env, ['openapi', '--out', copy, '--help']);
    expect(answer).toMatchObject({ code: 0, stderr: '' });
    expect(answer.stdout).toContain('openapi [--out <file>]');
    expect(readFileSync(copy, 'utf8')).toBe(readFileSync(join(ROOT, 'docs', 'openapi.json'), 'utf8'));
  });
});
