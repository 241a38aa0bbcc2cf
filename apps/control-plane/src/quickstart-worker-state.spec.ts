import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PLANE_RECORD, planeIdentity, quickstartWorkerState } from './quickstart-worker-state';

/** Issue 29 item 8: whose worker state a quickstart uses, on real files and real CA certificates. */
describe('the quickstart worker state of a control plane', () => {
  let dir: string;
  let caA: Buffer;
  let caB: Buffer;
  const selfSigned = (name: string) => {
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:P-256',
        '-nodes',
        '-days',
        '1',
        '-subj',
        `/CN=${name}`,
        '-keyout',
        join(dir, `${name}.key`),
        '-out',
        join(dir, `${name}.crt`),
      ],
      { stdio: 'ignore' },
    );
    return readFileSync(join(dir, `${name}.crt`));
  };

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'ql-worker-state-'));
    caA = selfSigned('青龙-ca-a');
    caB = selfSigned('青龙-ca-b');
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('names a database and a CA: not the password, not how a relative SQLite path is written', () => {
    const pg = planeIdentity('postgres://ql:secret@db.example.org:5432/qinglong', caA);
    expect(pg).toMatch(/^[0-9a-f]{12}$/);
    expect(planeIdentity('postgres://ql:other@db.example.org/qinglong', caA)).toBe(pg);
    expect(planeIdentity('postgres://ql@db.example.org:5432/qinglong_2', caA)).not.toBe(pg);
    expect(planeIdentity('postgres://ql@db.example.org:5432/qinglong', caB)).not.toBe(pg);
    expect(planeIdentity('sqlite:./var/ql.sqlite', caA)).toBe(
      planeIdentity(`sqlite:${join(process.cwd(), 'var', 'ql.sqlite')}`, caA),
    );
    expect(planeIdentity('sqlite:./var/ql.sqlite', caA)).not.toBe(
      planeIdentity('sqlite:./var/other.sqlite', caA),
    );
  });

  it('the usual folder for its first plane (or one made before planes were recorded); a folder of its own for another', () => {
    const root = join(dir, 'worker');
    expect(quickstartWorkerState(root, 'worker-1', 'aaaaaaaaaaaa')).toEqual({
      folder: join(root, 'worker-1'),
      moved: false,
    });
    expect(readFileSync(join(root, 'worker-1', PLANE_RECORD), 'utf8')).toBe('aaaaaaaaaaaa\n');
    expect(quickstartWorkerState(root, 'worker-1', 'bbbbbbbbbbbb')).toEqual({
      folder: join(root, 'worker-1@bbbbbbbbbbbb'),
      moved: true,
    });
    // Each plane finds its own again; the first one's record is not rewritten.
    expect(quickstartWorkerState(root, 'worker-1', 'aaaaaaaaaaaa').folder).toBe(join(root, 'worker-1'));
    expect(quickstartWorkerState(root, 'worker-1', 'bbbbbbbbbbbb').folder).toBe(
      join(root, 'worker-1@bbbbbbbbbbbb'),
    );
    expect(readFileSync(join(root, 'worker-1', PLANE_RECORD), 'utf8')).toBe('aaaaaaaaaaaa\n');
    // A state made by an older quickstart (no record) is its plane's: adopted, not left behind.
    mkdirSync(join(root, 'worker-2', 'journal'), { recursive: true });
    writeFileSync(join(root, 'worker-2', 'journal', 'journal.log'), '');
    expect(quickstartWorkerState(root, 'worker-2', 'cccccccccccc').folder).toBe(join(root, 'worker-2'));
    expect(readFileSync(join(root, 'worker-2', PLANE_RECORD), 'utf8')).toBe('cccccccccccc\n');
  });
});
