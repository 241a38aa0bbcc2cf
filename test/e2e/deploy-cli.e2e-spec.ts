/**
 * Issue 18: the CLI steps the deployments take (docker-compose.yml's setup job, docs/operations.md for
 * Kubernetes and systemd): `enroll-token create --out <file>` writes the token alone where
 * `QL_WORKER_ENROLL_TOKEN_FILE` reads it, and `pki --no-workers` makes the PKI of workers that enroll.
 * Real CLI processes on a real SQLite file.
 */
import { existsSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { runCli, tempDir } from '../support/entry-points';

/** Each test runs the CLI as a new node process several times (sources through SWC: seconds each under load). */
const CLI_TEST_MS = 240_000;

describe('the CLI steps of the deployments (enroll-token --out, pki --no-workers)', () => {
  let dir: string;
  let env: Record<string, string>;
  const cli = (...args: string[]) => runCli(env, ...args);

  beforeAll(async () => {
    dir = tempDir('ql-deploy-cli-');
    env = { QL_DATABASE_URL: `sqlite:${join(dir, 'ql.sqlite')}` };
    expect((await cli('migrate')).code).toBe(0);
  }, CLI_TEST_MS);
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it(
    'create --out writes the token alone to a 0600 file (for QL_WORKER_ENROLL_TOKEN_FILE), replacing one there, and prints the rest; --out elsewhere exits 2',
    async () => {
      const file = join(dir, 'worker.token');
      const views: { id: string; tokenFile: string; token?: string }[] = [];
      for (const n of [1, 2]) {
        const made = await cli(
          'enroll-token',
          'create',
          '--pattern',
          'site-*',
          '--count',
          '2',
          '--out',
          file,
        );
        expect({ n, code: made.code, stderr: made.stderr }).toEqual({
          n,
          code: 0,
          stderr: expect.stringMatching(/^database: \S+ \(QL_DATABASE_URL\)$/), // no "store the token now"
        });
        views.push(JSON.parse(made.stdout) as { id: string; tokenFile: string; token?: string });
        expect(views[n - 1]).toMatchObject({ tokenFile: file, maxWorkers: 2 });
        expect(views[n - 1]!.token).toBeUndefined();
        expect(readFileSync(file, 'utf8')).toMatch(/^qlet_[A-Za-z0-9_-]{43}\n$/);
        expect(statSync(file).mode & 0o777).toBe(0o600);
        expect(made.stdout).not.toContain(readFileSync(file, 'utf8').trim());
      }
      expect(views[0]!.id).not.toBe(views[1]!.id);
      expect(readdirSync(dir).filter((name) => name.includes('worker.token'))).toEqual(['worker.token']);
      for (const args of [
        ['list', '--out', file],
        ['create', '--worker', 'site-1', '--out', ''],
      ]) {
        const refused = await cli('enroll-token', ...args);
        expect({ args, code: refused.code, stdout: refused.stdout }).toEqual({ args, code: 2, stdout: '' });
      }
    },
    CLI_TEST_MS,
  );

  it(
    'pki --no-workers makes the CA, the server certificate and the worker issuer, and no worker key; with --worker it exits 2',
    async () => {
      const pki = join(dir, 'pki');
      const made = await runCli({ ...env, QL_DEV_PKI_DIR: pki }, 'pki', '--no-workers');
      expect(made.code).toBe(0);
      expect(JSON.parse(made.stdout)).toMatchObject({ workers: {} });
      for (const name of ['ca.crt', 'server.key', 'worker-issuer.crt', 'worker-issuer.key'])
        expect({ name, made: existsSync(join(pki, name)) }).toEqual({ name, made: true });
      expect(readdirSync(join(pki, 'workers'))).toEqual([]);
      const both = await runCli(
        { ...env, QL_DEV_PKI_DIR: join(dir, 'pki-2') },
        'pki',
        '--no-workers',
        '--worker',
        'w-1',
      );
      expect({ code: both.code, stdout: both.stdout }).toEqual({ code: 2, stdout: '' });
      expect(both.stderr).toMatch(/^--worker and --no-workers exclude each other\n/);
      expect(existsSync(join(dir, 'pki-2'))).toBe(false);
    },
    CLI_TEST_MS,
  );
});
