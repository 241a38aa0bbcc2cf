/**
 * ADR 0031: QL_WORKER_RUN_AS resolved and proven at start. The checks start real processes as
 * `nobody` (65534), which needs root: this suite asserts it runs as root (as the tests do here and in
 * CI) rather than passing without having checked anything.
 */
import { chmodSync, mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { WorkerConfigError } from '../config/worker-config';
import { checkRunAs, resolveRunAs } from './run-as';

const PASSWD = [
  'root:x:0:0:root:/root:/bin/bash',
  'toor:x:0:5:alias:/root:/bin/sh',
  'app:x:1000:1000::/home/app:/bin/sh',
  'nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin',
  '',
].join('\n');
const NOBODY = { uid: 65534, gid: 65534, label: 'nobody' };

describe('resolveRunAs', () => {
  it('looks a name up in /etc/passwd and keeps numeric ids as given', () => {
    expect(resolveRunAs({ user: 'nobody' }, 1000, () => PASSWD)).toEqual(NOBODY);
    expect(resolveRunAs({ uid: 10001, gid: 10002 }, 0, () => PASSWD)).toEqual({
      uid: 10001,
      gid: 10002,
      label: '10001:10002',
    });
  });

  it.each<[string, Parameters<typeof resolveRunAs>[0], number, RegExp]>([
    [
      'an unknown user',
      { user: 'no-such-user' },
      0,
      /QL_WORKER_RUN_AS=no-such-user: no such user in \/etc\/passwd/,
    ],
    ['a name with uid 0', { user: 'toor' }, 1000, /QL_WORKER_RUN_AS=toor has uid or gid 0/],
    [
      "the worker's own user by name",
      { user: 'app' },
      1000,
      /QL_WORKER_RUN_AS=app is the worker's own user \(uid 1000\)/,
    ],
    ["the worker's own uid", { uid: 1000, gid: 5 }, 1000, /QL_WORKER_RUN_AS=1000:5 is the worker's own user/],
  ])('refuses %s with a configuration error', (_what, spec, ownUid, message) => {
    expect(() => resolveRunAs(spec, ownUid, () => PASSWD)).toThrow(WorkerConfigError);
    expect(() => resolveRunAs(spec, ownUid, () => PASSWD)).toThrow(message);
  });

  it('reads the real /etc/passwd by default', () => {
    expect(resolveRunAs({ user: 'nobody' }, 0)).toEqual(NOBODY);
  });
});

describe('checkRunAs (real processes as nobody)', () => {
  let dir: string;
  let key: string;
  beforeEach(() => {
    expect({ testsRunAs: process.getuid!() }).toEqual({ testsRunAs: 0 }); // switching users needs root
    dir = mkdtempSync(join(tmpdir(), 'ql-run-as-'));
    chmodSync(dir, 0o711); // as /var/lib: the task user may pass through to the work root
    key = join(dir, 'worker.key');
    writeFileSync(key, 'PRIVATE KEY', { mode: 0o600 });
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('passes for an unprivileged user that cannot read the key, and leaves the work root 0711', async () => {
    const root = join(dir, 'state', 'runs');
    await checkRunAs(NOBODY, root, key);
    expect(statSync(root).mode & 0o777).toBe(0o711);
    expect(statSync(join(dir, 'state')).mode & 0o777).toBe(0o711);
  });

  it('refuses a key the task user could read', async () => {
    chmodSync(key, 0o644);
    await expect(checkRunAs(NOBODY, join(dir, 'runs'), key)).rejects.toThrow(
      /QL_WORKER_RUN_AS=nobody: the task user can read QL_WORKER_TLS_KEY/,
    );
  });

  it('refuses an enrollment token file the task user could read; one it cannot read passes', async () => {
    const token = join(dir, 'worker.token');
    writeFileSync(token, 'qlet_token', { mode: 0o600 });
    await checkRunAs(NOBODY, join(dir, 'runs'), key, token);
    chmodSync(token, 0o644);
    await expect(checkRunAs(NOBODY, join(dir, 'runs'), key, token)).rejects.toThrow(
      /QL_WORKER_RUN_AS=nobody: the task user can read QL_WORKER_ENROLL_TOKEN_FILE \(\S+worker\.token\)/,
    );
  });

  it('refuses a work root the task user cannot reach', async () => {
    mkdirSync(join(dir, 'private'), { mode: 0o700 });
    await expect(checkRunAs(NOBODY, join(dir, 'private', 'runs'), key)).rejects.toThrow(
      /uid 65534 cannot enter QL_WORKER_WORK_DIR .*: every folder above it must be searchable/,
    );
  });
});
