/**
 * Issue 29 item 5 (ADR 0050, amended): `npm run secret -- set|rotate` refuses to write what a running
 * control plane could not open — a plane without a key, with other keys, or with another key under the
 * same id — with `key_not_on_control_plane` naming the plane and the step, and writes nothing; once
 * every running plane holds the key (or none runs) it writes. Both dialects, real CLI processes.
 */
import { randomBytes } from 'node:crypto';
import { cliWithInput } from '../support/entry-points';
import {
  Dialect,
  TestDatabase,
  TestPlane,
  createTestDatabase,
  createTestPki,
  startTestPlane,
} from '../support/test-plane';

jest.setTimeout(180_000);

type TestPki = Awaited<ReturnType<typeof createTestPki>>;
const key1 = randomBytes(32).toString('base64');
const key2 = randomBytes(32).toString('base64');
const one = { QL_SECRETS_KEY: key1, QL_SECRETS_KEY_ID: 'one' };
const two = { QL_SECRETS_KEY: key2, QL_SECRETS_KEY_ID: 'two', QL_SECRETS_PREVIOUS_KEYS: `one:${key1}` };

describe.each<Dialect>(['sqlite', 'postgres'])(
  'secret set and rotate against a running plane (%s)',
  (dialect) => {
    let db: TestDatabase;
    let pki: TestPki;
    let plane: TestPlane | undefined;

    beforeAll(async () => {
      db = await createTestDatabase(dialect);
      pki = await createTestPki([]);
    });
    afterAll(async () => {
      await plane?.close();
      await db?.dispose();
      pki?.remove();
    });

    const run = async (env: Record<string, string>) => {
      await plane?.close();
      plane = await startTestPlane(db, pki, env, { seedKeys: false });
    };
    const cli = (env: Record<string, string>, args: string[], input = '') =>
      cliWithInput({ PATH: process.env.PATH ?? '', QL_DATABASE_URL: db.url, ...env }, args, input);
    const keyIds = () =>
      (JSON.parse(cli(one, ['secret', 'list']).stdout) as { items: { name: string; keyId: string }[] }).items;
    const refused = (r: { code: number | null; stdout: string; stderr: string }, holds: string) => {
      expect(r.code).toBe(1);
      expect(r.stdout).toBe('');
      expect(r.stderr).toMatch(
        /^secret: key_not_on_control_plane: a running control plane cannot open values under key/m,
      );
      expect(r.stderr).toContain(holds);
    };

    it('a plane without a key: set is refused, nothing stored; with no plane running it is stored', async () => {
      await run({});
      refused(cli(one, ['secret', 'set', 'jd-cookie'], 'v1'), 'it has no QL_SECRETS_KEY');
      expect(cli(one, ['secret', 'set', 'jd-cookie'], 'v1').stderr).toContain(
        'restart it with this QL_SECRETS_KEY and QL_SECRETS_KEY_ID=one first',
      );
      expect(keyIds()).toEqual([]);
      await plane!.close();
      plane = undefined;
      expect(cli(one, ['secret', 'set', 'jd-cookie'], 'v1').code).toBe(0);
    });

    it('another key under the same id is refused; the same key is stored', async () => {
      await run(one);
      refused(
        cli({ ...one, QL_SECRETS_KEY: key2 }, ['secret', 'set', 'other'], 'x'),
        'its key one is another key',
      );
      expect(cli(one, ['secret', 'set', 'second'], 'v2').code).toBe(0);
      expect(keyIds()).toEqual([
        expect.objectContaining({ name: 'jd-cookie', keyId: 'one' }),
        expect.objectContaining({ name: 'second', keyId: 'one' }),
      ]);
    });

    it('rotate to a key the running plane lacks is refused; after the plane restarts with it, rotate works', async () => {
      refused(cli(two, ['secret', 'rotate']), 'it holds key one');
      expect(cli(two, ['secret', 'rotate']).stderr).toContain(
        'the old key in QL_SECRETS_PREVIOUS_KEYS, first; then rotate',
      );
      expect(keyIds().map((s) => s.keyId)).toEqual(['one', 'one']);
      await run(two);
      const rotated = cli(two, ['secret', 'rotate']);
      expect(rotated.code).toBe(0);
      expect(keyIds().map((s) => s.keyId)).toEqual(['two', 'two']);
    });
  },
);
