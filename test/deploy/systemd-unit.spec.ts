/**
 * R-OPS-8: the documented systemd unit restarts a fenced or failed worker with back-off, leaves a
 * configuration error and what a restart cannot fix stopped, and sets only settings the worker
 * knows; its worker joins by enrollment (issue 18), the token a credential. docs/operations.md shows
 * the unit file as it is. test/e2e/systemd-unit-process.e2e-spec.ts runs its ExecStart.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, posix } from 'node:path';
import { WORKER_SETTINGS, loadWorkerConfig } from '../../apps/worker/src/config/worker-config';
import { WORKER_EXIT } from '@ql/contracts';
import { REPO_ROOT } from '../support/docker-emulation';
import { parseUnit, unitCredentials, unitEnvironment } from '../support/systemd-unit';
import { LAUNCHER } from '../support/worker-launcher';

const UNIT_FILE = join(REPO_ROOT, 'deploy', 'systemd', 'qinglong-worker@.service');
const text = readFileSync(UNIT_FILE, 'utf8');

const unit = parseUnit(text);
const service = unit.Service!;
const one = (key: string) => {
  expect({ key, count: service[key]?.length }).toEqual({ key, count: 1 });
  return service[key]![0]!;
};
/** systemd time spans as used here: `2s`, `5min`, `30` (seconds). */
const seconds = (span: string) => Number.parseInt(span, 10) * (span.endsWith('min') ? 60 : 1);

describe('systemd unit for a worker (deploy/systemd)', () => {
  it('restarts a fenced or failed worker with a growing delay, never gives up, and leaves stopped what a restart cannot fix: a configuration error, a disabled worker, an expired, superseded or revoked certificate, a refused token, a protocol not served', () => {
    expect(one('Restart')).toBe('on-failure');
    expect(one('RestartPreventExitStatus').split(/\s+/)).toEqual(
      [
        WORKER_EXIT.config,
        WORKER_EXIT.disabled,
        WORKER_EXIT.certificateExpired,
        WORKER_EXIT.certificateSuperseded,
        WORKER_EXIT.enrollmentRefused,
        WORKER_EXIT.certificateRevoked,
        WORKER_EXIT.protocolUnsupported,
      ].map(String),
    );
    expect(seconds(one('RestartSec'))).toBeGreaterThan(0);
    expect(Number(one('RestartSteps'))).toBeGreaterThan(0);
    expect(seconds(one('RestartMaxDelaySec'))).toBeGreaterThan(seconds(one('RestartSec')));
    expect(unit.Unit?.StartLimitIntervalSec).toEqual(['0']);
  });

  it('runs the worker through the launcher of its install folder (ADR 0046) with only worker settings, joining with a token credential, its key and everything else it writes in its state folder, and stops within the unit timeout', () => {
    // The launcher picks node's V8 flags and execs node: the unit's main process is node.
    expect(one('ExecStart')).toBe(`${one('WorkingDirectory')}/${LAUNCHER}`);
    expect(existsSync(join(REPO_ROOT, LAUNCHER))).toBe(true);
    const credentials = mkdtempSync(join(tmpdir(), 'ql-unit-credentials-'));
    try {
      const env = unitEnvironment(service, { i: 'router-7', d: credentials });
      const known = ['QL_PROFILE', ...WORKER_SETTINGS.map((s) => s.env)];
      expect(Object.keys(env).filter((k) => !known.includes(k))).toEqual([]);
      expect(env.QL_PROFILE).toBe('worker');
      // The token: a credential (a copy in the credentials folder), never in the environment.
      expect(env.QL_WORKER_ENROLL_TOKEN).toBeUndefined();
      const [[name, source]] = Object.entries(unitCredentials(service, 'router-7')) as [[string, string]];
      expect(env.QL_WORKER_ENROLL_TOKEN_FILE).toBe(`${credentials}/${name}`);
      expect(source).toMatch(/^\/etc\/qinglong\/\S*router-7\S*$/);
      writeFileSync(env.QL_WORKER_ENROLL_TOKEN_FILE!, `qlet_${'A'.repeat(43)}\n`, { mode: 0o600 });
      // The control plane URL comes from the EnvironmentFile.
      const config = loadWorkerConfig({
        ...env,
        QL_WORKER_CONTROL_PLANE_URL: 'https://workers.example.org:8443',
      });
      expect(config).toMatchObject({ workerId: 'router-7', enrollToken: `qlet_${'A'.repeat(43)}` });
      // ProtectSystem=strict: the state folder is the only place it may write, so every file it
      // writes is there: its key and certificate, journal, runs and unpacked bundles.
      expect(one('ProtectSystem')).toBe('strict');
      const state = `/var/lib/${one('StateDirectory').replace(/%i/g, 'router-7')}`;
      for (const path of [
        config.tlsKeyPath,
        config.tlsCertPath,
        config.journalDir,
        config.workDir,
        config.bundleCacheDir,
      ])
        expect({ path, inState: !posix.relative(state, path).startsWith('..') }).toEqual({
          path,
          inState: true,
        });
      expect(one('KillSignal')).toBe('SIGTERM');
      expect(seconds(one('TimeoutStopSec')) * 1000).toBeGreaterThan(config.stopBudgetMs);
    } finally {
      rmSync(credentials, { recursive: true, force: true });
    }
  });

  it('on stop, signals the worker only (KillMode=mixed): the worker stops its runs itself, and the rest is killed after TimeoutStopSec', () => {
    // The default, control-group, sends SIGTERM to every task at the moment the worker gets it.
    expect(one('KillMode')).toBe('mixed');
  });

  it('the documented install copies into /opt every file it later uses, the unit file among them', () => {
    const doc = readFileSync(join(REPO_ROOT, 'docs', 'operations.md'), 'utf8');
    const from = doc.indexOf('Installing it on a machine');
    const start = doc.indexOf('```sh\n', from) + 6;
    const block = doc.slice(start, doc.indexOf('\n```', start));
    const workingDirectory = one('WorkingDirectory');
    // "copy a/, b/, c and d into <WorkingDirectory>" (a comment may wrap over two lines)
    const copyLine = /copy ([^]*?) into (\S+)/.exec(block.replace(/\n#\s*/g, ' '));
    expect(copyLine?.[2]).toBe(workingDirectory);
    const copied = copyLine![1]!.split(/,? and |, /).map((p) => p.replace(/\/$/, ''));
    // `dist` is what `npm run build` writes (tsconfig.build.json's outDir), not a file of a clean clone.
    const outDir = (
      JSON.parse(readFileSync(join(REPO_ROOT, 'tsconfig.json'), 'utf8')) as {
        compilerOptions: { outDir: string };
      }
    ).compilerOptions.outDir;
    for (const path of copied) {
      const there = path === outDir || existsSync(join(REPO_ROOT, path));
      expect({ path, exists: there }).toEqual({ path, exists: true });
    }
    // The launcher ExecStart runs is copied too.
    expect(one('ExecStart')).toBe(`${workingDirectory}/${LAUNCHER}`);
    expect(copied).toContain(LAUNCHER.split('/')[0]);
    // Every file the commands read from the install folder is in what was copied, in this repository.
    const used = [...block.matchAll(new RegExp(`${workingDirectory}/(\\S+)`, 'g'))].map((m) => m[1]!);
    expect(used).toContain('deploy/systemd/qinglong-worker@.service');
    for (const path of used) {
      expect({ path, copied: copied.includes(path.split('/')[0]!) }).toEqual({ path, copied: true });
      expect({ path, exists: existsSync(join(REPO_ROOT, path)) }).toEqual({ path, exists: true });
    }
    // No file is taken from wherever the shell happens to be.
    expect(block).not.toMatch(/cp qinglong-worker@\.service/);
  });

  it('is shown in docs/operations.md exactly as shipped', () => {
    expect(readFileSync(join(REPO_ROOT, 'docs', 'operations.md'), 'utf8')).toContain(
      `\`\`\`ini\n${text}\`\`\``,
    );
  });
});
