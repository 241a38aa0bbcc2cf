import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { WORKER_SOFTWARE_VERSION } from '../worker.tokens';
import { HostProbe, detectCapabilities, pythonSemver } from './capabilities';
import { WORKER_SETTINGS, WorkerConfigError, loadWorkerConfig, workerConfigTable } from './worker-config';

describe('loadWorkerConfig', () => {
  it('has a default for everything', () => {
    expect(loadWorkerConfig({})).toEqual({
      workerId: 'worker-1',
      controlPlaneOrigins: ['https://127.0.0.1:8443'],
      tlsCaPath: './var/pki/ca.crt',
      tlsCertPath: './var/pki/workers/worker-1.crt',
      tlsKeyPath: './var/pki/workers/worker-1.key',
      enrollToken: '',
      enrollTokenFile: '',
      certRenewAtPercent: 67,
      maxConcurrentRuns: 1,
      protocolMax: 4,
      heartbeatMs: 5000,
      pullIntervalMs: 1000,
      pullWaitMs: 20000,
      requestTimeoutMs: 5000,
      stopBudgetMs: 10000,
      labels: {},
      journalDir: './var/worker/worker-1/journal',
      journalMaxRecords: 64,
      workDir: './var/worker/worker-1/runs',
      keepFailedRuns: 5,
      keepFailedBytes: 104857600,
      bundleCacheDir: './var/worker/worker-1/bundles',
      bundleCacheMb: 256,
      killGraceMs: 5000,
      reaperLingerMs: 2000,
      cgroup: 'auto',
      outputMaxBytes: 1048576,
      logLingerMs: 200,
      runningReportDelayMs: 20,
      runAs: null,
      logLevel: 'info',
      machineClass: 'auto',
    });
  });

  it('reads the bound of kept failed work folders, and refuses one out of range (ADR 0038)', () => {
    const c = loadWorkerConfig({ QL_WORKER_KEEP_FAILED_RUNS: '0', QL_WORKER_KEEP_FAILED_BYTES: '1024' });
    expect({ runs: c.keepFailedRuns, bytes: c.keepFailedBytes }).toEqual({ runs: 0, bytes: 1024 });
    expect(() => loadWorkerConfig({ QL_WORKER_KEEP_FAILED_RUNS: '1001' })).toThrow(
      /QL_WORKER_KEEP_FAILED_RUNS/,
    );
    expect(() => loadWorkerConfig({ QL_WORKER_KEEP_FAILED_BYTES: '-1' })).toThrow(
      /QL_WORKER_KEEP_FAILED_BYTES/,
    );
  });

  it('reads an enrollment token, and refuses a malformed one without echoing it (ADR 0045)', () => {
    const token = `qlet_${'A'.repeat(43)}`;
    expect(loadWorkerConfig({ QL_WORKER_ENROLL_TOKEN: token }).enrollToken).toBe(token);
    const wrong = `qlet_${'s3cret'.repeat(7)}`;
    let message = '';
    try {
      loadWorkerConfig({ QL_WORKER_ENROLL_TOKEN: wrong });
    } catch (error) {
      message = (error as Error).message;
    }
    expect(message).toMatch(/QL_WORKER_ENROLL_TOKEN is not an enrollment token/);
    expect(message).not.toContain('s3cret');
    expect(() => loadWorkerConfig({ QL_WORKER_CA: '/ca.crt' })).toThrow(
      /unknown worker setting.*QL_WORKER_CA/,
    );
    expect(() => loadWorkerConfig({ QL_WORKER_CERT_RENEW_AT_PERCENT: '91' })).toThrow(
      /QL_WORKER_CERT_RENEW_AT_PERCENT/,
    );
  });

  it('reads the token from QL_WORKER_ENROLL_TOKEN_FILE (its line break dropped); refuses it beside QL_WORKER_ENROLL_TOKEN, unreadable, empty or not a token, never echoing the contents', () => {
    const dir = mkdtempSync(join(tmpdir(), 'ql-token-file-'));
    try {
      const token = `qlet_${'B'.repeat(43)}`;
      const file = join(dir, 'token');
      writeFileSync(file, `${token}\n`, { mode: 0o600 });
      expect(loadWorkerConfig({ QL_WORKER_ENROLL_TOKEN_FILE: file })).toMatchObject({
        enrollToken: token,
        enrollTokenFile: file,
      });
      const messageOf = (env: Record<string, string>) => {
        try {
          loadWorkerConfig(env);
        } catch (error) {
          expect(error).toBeInstanceOf(WorkerConfigError);
          return (error as Error).message;
        }
        throw new Error('no error');
      };
      expect(messageOf({ QL_WORKER_ENROLL_TOKEN_FILE: file, QL_WORKER_ENROLL_TOKEN: token })).toBe(
        'set QL_WORKER_ENROLL_TOKEN or QL_WORKER_ENROLL_TOKEN_FILE, not both',
      );
      expect(messageOf({ QL_WORKER_ENROLL_TOKEN_FILE: join(dir, 'none') })).toMatch(
        /^QL_WORKER_ENROLL_TOKEN_FILE=\S+none cannot be read \(ENOENT\)/,
      );
      expect(messageOf({ QL_WORKER_ENROLL_TOKEN_FILE: dir })).toMatch(
        /^QL_WORKER_ENROLL_TOKEN_FILE=\S+ is not a file$/,
      );
      writeFileSync(join(dir, 'empty'), '\n');
      expect(messageOf({ QL_WORKER_ENROLL_TOKEN_FILE: join(dir, 'empty') })).toMatch(
        / is empty: write the token/,
      );
      writeFileSync(join(dir, 'wrong'), `qlet_${'s3cret'.repeat(7)}\n`);
      const wrong = messageOf({ QL_WORKER_ENROLL_TOKEN_FILE: join(dir, 'wrong') });
      expect(wrong).toMatch(/^QL_WORKER_ENROLL_TOKEN_FILE \(\S+wrong\) is not an enrollment token/);
      expect(wrong).not.toContain('s3cret');
      writeFileSync(join(dir, 'large'), 's3cret'.repeat(200));
      const large = messageOf({ QL_WORKER_ENROLL_TOKEN_FILE: join(dir, 'large') });
      expect(large).toMatch(/holds 1200 bytes: not an enrollment token/);
      expect(large).not.toContain('s3cret');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('reads QL_WORKER_CGROUP: auto, off, or an absolute path (a trailing / dropped)', () => {
    expect(loadWorkerConfig({ QL_WORKER_CGROUP: 'off' }).cgroup).toBe('off');
    expect(loadWorkerConfig({ QL_WORKER_CGROUP: '/sys/fs/cgroup/ql/' }).cgroup).toBe('/sys/fs/cgroup/ql');
  });

  it('reads QL_WORKER_RUN_AS as a user name or numeric ids (ADR 0031)', () => {
    expect(loadWorkerConfig({ QL_WORKER_RUN_AS: 'qinglong-task' }).runAs).toEqual({ user: 'qinglong-task' });
    expect(loadWorkerConfig({ QL_WORKER_RUN_AS: ' 10001:10002 ' }).runAs).toEqual({ uid: 10001, gid: 10002 });
    expect(loadWorkerConfig({ QL_WORKER_RUN_AS: '' }).runAs).toBeNull();
  });

  it('reads a comma-separated list of control-plane origins, in order (R-WRK-7)', () => {
    const c = loadWorkerConfig({
      QL_WORKER_CONTROL_PLANE_URL: ' https://cp-2.example:8443/, https://10.0.0.7:8443,https://[::1]:9443',
    });
    expect(c.controlPlaneOrigins).toEqual([
      'https://cp-2.example:8443',
      'https://10.0.0.7:8443',
      'https://[::1]:9443',
    ]);
    const eight = Array.from({ length: 8 }, (_, i) => `https://cp-${i}:8443`);
    expect(loadWorkerConfig({ QL_WORKER_CONTROL_PLANE_URL: eight.join(',') }).controlPlaneOrigins).toEqual(
      eight,
    );
  });

  it('derives the certificate paths from the worker id and parses labels', () => {
    const c = loadWorkerConfig({
      QL_WORKER_ID: 'edge-7',
      QL_WORKER_LABELS: 'zone=lab, kubernetes.io/hostname=node-1,empty=',
    });
    expect(c.tlsCertPath).toBe('./var/pki/workers/edge-7.crt');
    expect(c.tlsKeyPath).toBe('./var/pki/workers/edge-7.key');
    expect(c.journalDir).toBe('./var/worker/edge-7/journal');
    expect(c.workDir).toBe('./var/worker/edge-7/runs');
    expect(c.labels).toEqual({ zone: 'lab', 'kubernetes.io/hostname': 'node-1', empty: '' });
  });

  it.each<[string, Record<string, string>, RegExp]>([
    ['a bad worker id', { QL_WORKER_ID: 'Worker_1' }, /QL_WORKER_ID=Worker_1 must match/],
    ['an http URL', { QL_WORKER_CONTROL_PLANE_URL: 'http://127.0.0.1:8443' }, /must be an https:\/\/ URL/],
    ['a URL with a path', { QL_WORKER_CONTROL_PLANE_URL: 'https://cp:8443/api' }, /must be an origin/],
    ['not a URL', { QL_WORKER_CONTROL_PLANE_URL: 'cp:8443' }, /https/],
    [
      'a bad second origin',
      { QL_WORKER_CONTROL_PLANE_URL: 'https://cp-1:8443,http://cp-2:8443' },
      /must be an https:\/\/ URL/,
    ],
    [
      'an origin listed twice',
      { QL_WORKER_CONTROL_PLANE_URL: 'https://cp-1:8443, https://CP-1:8443/' },
      /https:\/\/cp-1:8443 appears twice/,
    ],
    [
      'an empty origin',
      { QL_WORKER_CONTROL_PLANE_URL: 'https://cp-1:8443,,https://cp-2' },
      /item 2 is empty/,
    ],
    [
      'nine origins',
      { QL_WORKER_CONTROL_PLANE_URL: Array.from({ length: 9 }, (_, i) => `https://cp-${i}:8443`).join(',') },
      /has 9 origins; at most 8/,
    ],
    [
      'zero runs',
      { QL_WORKER_MAX_CONCURRENT_RUNS: '0' },
      /QL_WORKER_MAX_CONCURRENT_RUNS=0 must be an integer in 1..1024/,
    ],
    [
      'a protocol below v1',
      { QL_WORKER_PROTOCOL_MAX: '2' },
      /QL_WORKER_PROTOCOL_MAX=2 must be an integer in 3..4/,
    ],
    [
      'a protocol above v2',
      { QL_WORKER_PROTOCOL_MAX: '5' },
      /QL_WORKER_PROTOCOL_MAX=5 must be an integer in 3..4/,
    ],
    [
      'a fractional heartbeat',
      { QL_WORKER_HEARTBEAT_MS: '1.5' },
      /QL_WORKER_HEARTBEAT_MS=1.5 must be an integer/,
    ],
    [
      'a request timeout above the stop budget',
      { QL_WORKER_STOP_BUDGET_MS: '1000', QL_WORKER_REQUEST_TIMEOUT_MS: '2000' },
      /must be below QL_WORKER_STOP_BUDGET_MS/,
    ],
    [
      'a journal above the hard limit',
      { QL_WORKER_JOURNAL_MAX_RECORDS: '1025' },
      /QL_WORKER_JOURNAL_MAX_RECORDS=1025 must be an integer in 1\.\.1024/,
    ],
    [
      'a journal smaller than the runs going at once',
      { QL_WORKER_MAX_CONCURRENT_RUNS: '8', QL_WORKER_JOURNAL_MAX_RECORDS: '4' },
      /QL_WORKER_JOURNAL_MAX_RECORDS \(4\) must be at least QL_WORKER_MAX_CONCURRENT_RUNS \(8\)/,
    ],
    ['an empty journal folder', { QL_WORKER_JOURNAL_DIR: ' ' }, /QL_WORKER_JOURNAL_DIR must not be empty/],
    [
      'a relative cgroup path',
      { QL_WORKER_CGROUP: 'ql-runs' },
      /QL_WORKER_CGROUP=ql-runs must be auto, off or an absolute path/,
    ],
    ['a cgroup path with ..', { QL_WORKER_CGROUP: '/sys/fs/cgroup/../x' }, /no \. or \.\. segments/],
    ['a label without =', { QL_WORKER_LABELS: 'zone' }, /item 1 is not k=v/],
    ['a bad label key', { QL_WORKER_LABELS: 'Zone=x' }, /label key "Zone"/],
    ['a duplicate label key', { QL_WORKER_LABELS: 'a=1,a=2' }, /appears twice/],
    [
      '33 labels',
      { QL_WORKER_LABELS: Array.from({ length: 33 }, (_, i) => `k${i}=v`).join(',') },
      /at most 32/,
    ],
    [
      'a typo in a setting name',
      { QL_WORKER_HEARTBEAT: '100' },
      /unknown worker setting\(s\): QL_WORKER_HEARTBEAT/,
    ],
    ['an unknown log level', { QL_WORKER_LOG_LEVEL: 'trace' }, /not one of debug, info, warn, error/],
    [
      'tasks as uid 0',
      { QL_WORKER_RUN_AS: '0:65534' },
      /QL_WORKER_RUN_AS=0:65534: tasks must not run as root/,
    ],
    [
      'tasks in gid 0',
      { QL_WORKER_RUN_AS: '65534:0' },
      /tasks must not run as root \(uid 0\) or in its group/,
    ],
    [
      'tasks as root by name',
      { QL_WORKER_RUN_AS: 'root' },
      /QL_WORKER_RUN_AS=root: tasks must not run as root/,
    ],
    ['a bare uid', { QL_WORKER_RUN_AS: '0' }, /QL_WORKER_RUN_AS=0: give numeric ids as <uid>:<gid>/],
    ['a uid past 2^32-2', { QL_WORKER_RUN_AS: '4294967295:1' }, /ids must be at most 4294967294/],
    ['not a user name', { QL_WORKER_RUN_AS: 'a b' }, /neither a user name nor <uid>:<gid>/],
  ])('fails fast with a clear message on %s', (_name, env, message) => {
    expect(() => loadWorkerConfig(env)).toThrow(WorkerConfigError);
    expect(() => loadWorkerConfig(env)).toThrow(message);
  });

  it('never echoes a label value in an error', () => {
    expect(() => loadWorkerConfig({ QL_WORKER_LABELS: `site=${'s3cret'.repeat(30)}` })).toThrow(
      /value of "site"/,
    );
    expect(() => loadWorkerConfig({ QL_WORKER_LABELS: `site=${'s3cret'.repeat(30)}` })).not.toThrow(/s3cret/);
  });

  it('ignores the settings of other deployables', () => {
    expect(() => loadWorkerConfig({ QL_PROFILE: 'worker', QL_DATABASE_URL: 'x' })).not.toThrow();
  });

  it("ignores the control plane's issuer settings that share its prefix, and no other (ADR 0045 §5)", () => {
    const issuer = {
      QL_WORKER_ISSUER_CERT: 'a.crt',
      QL_WORKER_ISSUER_KEY: 'a.key',
      QL_WORKER_ISSUER_KEY_PEM: 'pem',
      QL_WORKER_CERT_TTL_MS: '300000',
    };
    expect(() => loadWorkerConfig(issuer)).not.toThrow();
    expect(() => loadWorkerConfig({ QL_WORKER_ISSUER_CERTS: 'a.crt' })).toThrow(
      /unknown worker setting\(s\): QL_WORKER_ISSUER_CERTS/,
    );
  });

  it('documents every setting in the README table', () => {
    const table = workerConfigTable();
    for (const s of WORKER_SETTINGS) expect(table).toContain(`| \`${s.env}\` |`);
    expect(table).toContain('`./var/pki/workers/$QL_WORKER_ID.crt`*');
  });

  it('the README shows the current table', () => {
    const readme = readFileSync(join(__dirname, '../../../../README.md'), 'utf8');
    const start = readme.indexOf('<!-- worker-config-table:start -->');
    const end = readme.indexOf('<!-- worker-config-table:end -->');
    expect(readme.slice(start, end)).toContain(workerConfigTable());
  });

  it('declares the package version as its software version', () => {
    const pkg = JSON.parse(readFileSync(join(__dirname, '../../../../package.json'), 'utf8')) as {
      version: string;
    };
    expect(WORKER_SOFTWARE_VERSION).toBe(pkg.version);
  });
});

describe('detectCapabilities', () => {
  const probe = (over: Partial<HostProbe> = {}): HostProbe => ({
    arch: () => 'x64',
    platform: () => 'linux',
    totalMemoryBytes: () => 256 * 1024 * 1024 + 12345,
    freeDiskBytes: async () => 0,
    nodeVersion: () => '20.20.2',
    python3VersionOutput: async () => null,
    ...over,
  });

  it('describes the host in canonical form; python is left out when missing', async () => {
    const { capabilities } = await detectCapabilities({}, probe());
    expect(capabilities).toEqual({
      architecture: 'x64',
      operatingSystem: 'linux',
      executors: ['local-process'],
      runtimes: [{ name: 'node', version: '20.20.2' }],
      labels: {},
      memoryMiB: 256,
      diskMiB: 0,
      gpus: [],
      features: [],
    });
  });

  it.each([
    ['Python 3.11.7', '3.11.7'],
    ['Python 3.13.0rc1', '3.13.0'],
    ['Python 3.08.1', '3.8.1'],
    ['python: command not found', null],
    [null, null],
  ])('reads %p as %p', (output, version) => {
    expect(pythonSemver(output)).toBe(version);
  });

  it('detects this machine', async () => {
    const { capabilities } = await detectCapabilities({ zone: 'lab' });
    expect(capabilities.runtimes).toContainEqual({ name: 'node', version: process.versions.node });
    expect(capabilities.memoryMiB).toBeGreaterThan(0);
    expect(capabilities.labels).toEqual({ zone: 'lab' });
  });
});
