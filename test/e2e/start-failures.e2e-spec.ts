/**
 * R-OPS-3, R-OPS-8: a start that cannot work is reported once, in one line that names the setting or
 * file, with the same exit code on every entry point (2: configuration, like the worker's), and the
 * quickstart then starts no worker.
 */
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { WORKER_EXIT } from '../../apps/worker/src/worker-exit';
import { CLI, CONTROL_PLANE, EntryPoint, QUICKSTART, WORKER, tempDir } from '../support/entry-points';

interface Case {
  name: string;
  entry: string;
  args?: string[];
  env: (dir: string) => Record<string, string>;
  code: number;
  /** The one line that says what is wrong. */
  line: (dir: string) => string;
}

const base = (dir: string) => ({
  QL_ADMIN_PORT: '0',
  QL_INGRESS_PORT: '0',
  QL_DATABASE_URL: `sqlite:${join(dir, 'ql.sqlite')}`,
  QL_DEV_PKI_DIR: join(dir, 'pki'),
});
const badPort = (dir: string) => ({ ...base(dir), QL_ADMIN_PORT: 'eighty' });
const badPortLine = () => 'configuration error: QL_ADMIN_PORT';

const CASES: Case[] = [
  {
    name: 'quickstart: the database file is not a database',
    entry: QUICKSTART,
    env: (dir) => ({ ...base(dir), QL_DATABASE_URL: `sqlite:${join(dir, 'not-a-db.sqlite')}` }),
    code: 1,
    line: (dir) =>
      `control plane failed to start: cannot open the database QL_DATABASE_URL=sqlite:${join(dir, 'not-a-db.sqlite')}: file is not a database`,
  },
  {
    name: 'quickstart: QL_PROFILE=worker',
    entry: QUICKSTART,
    env: (dir) => ({ ...base(dir), QL_PROFILE: 'worker' }),
    code: 2,
    line: () => 'configuration error: QL_PROFILE=worker runs the headless worker',
  },
  {
    name: 'quickstart: no PKI files and QL_DEV_PKI=false',
    entry: QUICKSTART,
    env: (dir) => ({ ...base(dir), QL_DEV_PKI: 'false', QL_DEV_PKI_DIR: join(dir, 'no-pki') }),
    code: 2,
    line: (dir) => `configuration error: QL_TLS_CA=${join(dir, 'no-pki', 'ca.crt')} cannot be read (ENOENT)`,
  },
  { name: 'quickstart: a bad setting', entry: QUICKSTART, env: badPort, code: 2, line: badPortLine },
  { name: 'control plane: a bad setting', entry: CONTROL_PLANE, env: badPort, code: 2, line: badPortLine },
  { name: 'CLI migrate: a bad setting', entry: CLI, args: ['migrate'], env: badPort, code: 2, line: badPortLine },
  {
    name: 'worker: a bad setting',
    entry: WORKER,
    env: () => ({ QL_PROFILE: 'worker', QL_WORKER_HEARTBEAT_MS: 'often' }),
    code: WORKER_EXIT.config,
    line: () => 'worker configuration error: QL_WORKER_HEARTBEAT_MS',
  },
];

describe('entry points that cannot start', () => {
  let dir: string;
  beforeAll(() => {
    dir = tempDir('ql-start-failures-');
    writeFileSync(join(dir, 'not-a-db.sqlite'), 'these bytes are not SQLite\n');
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it.each(CASES)('$name: one line, exit $code, no worker', async ({ entry, args, env, code, line }) => {
    const p = new EntryPoint(entry, env(dir), args);
    const exit = await p.exited;
    const expected = line(dir);

    expect({ exit, cause: p.stderr.filter((l) => l.includes(expected)).length }).toEqual({
      exit: { code, signal: null },
      cause: 1,
    });
    expect(p.stderr.join('\n')).not.toMatch(/^\s+at |Error:/m); // no stack trace
    expect(p.messages().filter((m) => /worker/.test(m))).toEqual([]);
    if (entry === QUICKSTART) {
      expect(p.stderr).toEqual([
        expect.stringContaining(expected),
        `quickstart: the control plane did not start (code ${code}); no worker was started`,
      ]);
    } else {
      expect(p.stderr).toHaveLength(1);
    }
  });
});
