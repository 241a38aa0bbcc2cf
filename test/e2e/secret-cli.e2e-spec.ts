// `npm run secret -- …` (issue 19 item 5, ADR 0050): the value comes on stdin, never argv; answers are
// metadata; rotation re-encrypts; the SQLite file never holds the plaintext.
import { randomBytes } from 'node:crypto';
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { cliWithInput, tempDir } from '../support/entry-points';

const VALUE = 'pt_key=CLI-secret-value-0123;pt_pin=cli;';

describe('npm run secret', () => {
  const dir = tempDir('ql-secret-cli-');
  const file = join(dir, 'ql.sqlite');
  const key1 = randomBytes(32).toString('base64');
  const key2 = randomBytes(32).toString('base64');
  const base = { PATH: process.env.PATH ?? '', QL_DATABASE_URL: `sqlite:${file}` };
  const withKey1 = { ...base, QL_SECRETS_KEY: key1, QL_SECRETS_KEY_ID: 'one' };

  const cli = cliWithInput;
  beforeAll(() => {
    expect(cli(base, ['migrate']).code).toBe(0);
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('set reads the value from stdin (one trailing line break dropped) and answers metadata only', () => {
    const set = cli(withKey1, ['secret', 'set', 'jd-cookie'], `${VALUE}\n`);
    expect(set.code).toBe(0);
    expect(JSON.parse(set.stdout)).toMatchObject({ name: 'jd-cookie', keyId: 'one', created: true });
    expect(set.stdout + set.stderr).not.toContain(VALUE);
    const again = cli(withKey1, ['secret', 'set', 'jd-cookie'], VALUE);
    expect(JSON.parse(again.stdout)).toMatchObject({ created: false });
    const list = cli(withKey1, ['secret', 'list']);
    expect(JSON.parse(list.stdout)).toEqual({
      items: [expect.objectContaining({ name: 'jd-cookie' })],
      nextAfter: null,
    });
    expect(readFileSync(file).includes(Buffer.from(VALUE))).toBe(false);
  });

  it('refuses a value given as an argument, a bad name and an unknown action (exit 2), writing nothing', () => {
    for (const args of [
      ['secret', 'set', 'jd-cookie', VALUE],
      ['secret', 'set', 'bad&name'],
      ['secret', 'show', 'jd-cookie'],
    ]) {
      const r = cli(withKey1, args, 'x');
      expect(r.code).toBe(2);
      expect(r.stdout).toBe('');
    }
    expect(cli(withKey1, ['secret', 'set', 'jd-cookie', VALUE]).stderr).toMatch(/never as an argument/);
  });

  it('without a key, set exits 1 naming QL_SECRETS_KEY', () => {
    const r = cli(base, ['secret', 'set', 'other'], 'v');
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/QL_SECRETS_KEY/);
  });

  it('rotate re-encrypts every value to the current key; the old key alone then cannot open them', () => {
    cli(withKey1, ['secret', 'set', 'second'], 'second-value');
    const env2 = {
      ...base,
      QL_SECRETS_KEY: key2,
      QL_SECRETS_KEY_ID: 'two',
      QL_SECRETS_PREVIOUS_KEYS: `one:${key1}`,
    };
    const rotated = cli(env2, ['secret', 'rotate']);
    expect(rotated.code).toBe(0);
    expect(JSON.parse(rotated.stdout)).toEqual({ reencrypted: 2, current: 0 });
    expect(JSON.parse(cli(env2, ['secret', 'rotate']).stdout)).toEqual({ reencrypted: 0, current: 2 });
    const list = JSON.parse(
      cli({ ...base, QL_SECRETS_KEY: key2, QL_SECRETS_KEY_ID: 'two' }, ['secret', 'list']).stdout,
    ) as {
      items: { keyId: string }[];
    };
    expect(list.items.map((i) => i.keyId)).toEqual(['two', 'two']);
    const stale = cli(withKey1, ['secret', 'rotate']);
    expect(stale.code).toBe(1);
    expect(stale.stderr).toMatch(/key id two, which is not configured/);
  });

  it('delete removes one; an unknown name exits 1', () => {
    const env = { ...base, QL_SECRETS_KEY: key2, QL_SECRETS_KEY_ID: 'two' };
    expect(JSON.parse(cli(env, ['secret', 'delete', 'second']).stdout)).toMatchObject({
      name: 'second',
      deleted: true,
    });
    expect(cli(env, ['secret', 'delete', 'second']).code).toBe(1);
  });
});
