// `npm run env -- import <file>` (issue 31 item 2, ADR 0061): QingLong's env JSON export, the report
// only without --yes, applied with it, a second import changing nothing; the SQLite file never holds
// a secret variable's value.
import { randomBytes } from 'node:crypto';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { cliWithInput, tempDir } from '../support/entry-points';

const COOKIE = `pt_key=CLI-env-${randomBytes(8).toString('hex')};pt_pin=jd_cli;`;

describe('npm run env', () => {
  const dir = tempDir('ql-env-cli-');
  const db = join(dir, 'ql.sqlite');
  const exported = join(dir, 'env.json');
  const env = {
    PATH: process.env.PATH ?? '',
    QL_DATABASE_URL: `sqlite:${db}`,
    QL_SECRETS_KEY: randomBytes(32).toString('base64'),
  };
  const cli = (args: string[]) => cliWithInput(env, args);

  beforeAll(() => {
    expect(cli(['migrate']).code).toBe(0);
    writeFileSync(
      exported,
      JSON.stringify([
        { id: 1, name: 'JD_COOKIE', value: COOKIE, remarks: '京东账号一', status: 0, position: 1 },
        { id: 2, name: 'JD_COOKIE', value: 'pt_key=two;pt_pin=jd_two;', remarks: '京东账号二', status: 0 },
        { id: 3, name: 'JD_UA', value: 'jdapp;iPhone', remarks: null, status: 0 },
        { id: 4, name: 'OLD_NOTIFY', value: 'bark', remarks: '停用', status: 1 },
      ]),
    );
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('prints the report and writes nothing without --yes; applies with it; a second import changes nothing', () => {
    const before = readFileSync(db);
    const dry = cli(['env', 'import', exported, '--plain', 'JD_UA']);
    expect(dry.code).toBe(0);
    expect(JSON.parse(dry.stdout)).toMatchObject({
      applied: false,
      create: ['JD_COOKIE', 'JD_UA', 'OLD_NOTIFY'],
      skipped: [],
    });
    expect(dry.stderr).toMatch(/nothing was written; run again with --yes/);
    expect(readFileSync(db).equals(before)).toBe(true);

    const applied = cli(['env', 'import', exported, '--plain', 'JD_UA', '--yes']);
    expect(applied.code).toBe(0);
    expect(JSON.parse(applied.stdout)).toMatchObject({
      applied: true,
      create: ['JD_COOKIE', 'JD_UA', 'OLD_NOTIFY'],
    });
    expect(applied.stdout + applied.stderr).not.toContain(COOKIE);
    expect(readFileSync(db).includes(Buffer.from(COOKIE))).toBe(false);

    const again = cli(['env', 'import', exported, '--plain', 'JD_UA', '--yes']);
    expect(JSON.parse(again.stdout)).toMatchObject({
      applied: true,
      create: [],
      update: [],
      unchanged: ['JD_COOKIE', 'JD_UA', 'OLD_NOTIFY'],
    });
  });

  it('a usage error or an unreadable file exits 2 writing nothing', () => {
    for (const args of [
      ['env', 'export', exported],
      ['env', 'import'],
      ['env', 'import', join(dir, 'missing.sh')],
    ]) {
      const r = cli(args);
      expect({ args, code: r.code, stdout: r.stdout }).toEqual({ args, code: 2, stdout: '' });
    }
  });
});
