/**
 * ADR 0020: what a standalone control plane loads at start. A real control plane process (SQLite, its
 * dev PKI already made, as on every start after the first) is asked, through a preloaded probe
 * (test/support/loaded-packages-probe.js), which npm packages it holds once ready: none of those it
 * has no use for at idle (PostgreSQL's driver, the certificate generator, class-validator's phone and
 * string rule libraries), and no `Intl.DateTimeFormat` (ICU's locale data, ADR 0024). The document it
 * no longer builds at start is still served on request.
 */
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { ingressPath } from '@ql/contracts';
import { loadConfig } from '../../apps/control-plane/src/config/config';
import { ensureDevPki } from '../../apps/control-plane/src/pki';
import { CONTROL_PLANE, EntryPoint, ROOT, postIngress, tempDir } from '../support/entry-points';
import { newSessionId, registerBody } from '../support/fixtures';

/** Packages a standalone control plane must not load before it is used for them. */
const NOT_AT_IDLE = ['pg', '@peculiar/x509', 'libphonenumber-js', 'validator'];

describe('the standalone control plane at idle (ADR 0020)', () => {
  let dir: string;
  let pkiDir: string;
  let plane: EntryPoint;
  const ready = () => plane.lines.find((l) => l.msg === 'control plane ready')!;

  beforeAll(async () => {
    dir = tempDir('ql-footprint-');
    pkiDir = join(dir, 'pki');
    await ensureDevPki(pkiDir, { trustDomain: loadConfig({}).trustDomain, workers: ['worker-1'] });
    plane = new EntryPoint(CONTROL_PLANE, {
      QL_ADMIN_PORT: '0',
      QL_INGRESS_PORT: '0',
      QL_DATABASE_URL: `sqlite:${join(dir, 'ql.sqlite')}`,
      QL_DEV_PKI_DIR: pkiDir,
      QL_LOG_LEVEL: 'warn',
      NODE_OPTIONS: `--require ${join(ROOT, 'test', 'support', 'loaded-packages-probe.js')}`,
    });
    await plane.until(
      'control plane ready',
      async () => plane.lines.find((l) => l.msg === 'control plane ready'),
      { deadlineMs: 60_000 },
    );
  });
  afterAll(async () => {
    if (plane?.running) {
      plane.kill('SIGTERM');
      await plane.exited;
    }
    rmSync(dir, { recursive: true, force: true });
  });

  const probe = async (): Promise<{ packages: string[]; dateTimeFormats: number }> => {
    const before = plane.lines.length;
    plane.kill('SIGUSR2');
    const line = await plane.until('the loaded packages probe', async () =>
      plane.lines.slice(before).find((l) => l.msg === 'loaded packages probe'),
    );
    return line as unknown as { packages: string[]; dateTimeFormats: number };
  };
  const loadedPackages = async () => (await probe()).packages;

  it('has not loaded what it does not use at idle, and has loaded what it does', async () => {
    const packages = await loadedPackages();
    expect(packages).toEqual(
      expect.arrayContaining(['better-sqlite3', 'class-validator', 'typeorm', 'fastify']),
    );
    expect(packages.filter((p) => NOT_AT_IDLE.includes(p))).toEqual([]);
  });

  it("has built no date formatter: Nest's logger formatters wait for a first use (ADR 0024)", async () => {
    expect((await probe()).dateTimeFormats).toBe(0);
  });

  it("states the SQLite pragmas in force in its ready line: the page cache bounded (ADR 0053)", () => {
    expect(ready().sqlite).toEqual({
      pageSize: 4096,
      cacheSize: -4096,
      cacheKiB: 4096,
      mmapSize: 0,
      walAutocheckpoint: 1000,
      journalMode: 'wal',
    });
  });

  it('builds its OpenAPI document on the first request for it', async () => {
    const admin = String(ready().admin);
    const res = await fetch(`${admin}/openapi.json`);
    expect(res.status).toBe(200);
    const document = (await res.json()) as { openapi: string; paths: Record<string, unknown> };
    expect(document.openapi).toBe('3.1.0');
    expect(Object.keys(document.paths)).toEqual(expect.arrayContaining(['/openapi.json', '/docs']));
  });

  it('checks a worker certificate without loading a certificate library', async () => {
    const worker = join(pkiDir, 'workers', 'worker-1');
    const tls = { ca: join(pkiDir, 'ca.crt'), cert: `${worker}.crt`, key: `${worker}.key` };
    const res = await postIngress(
      String(ready().ingress),
      tls,
      ingressPath('worker-1', newSessionId(), 'register'),
      registerBody(),
    );
    expect(res.status).toBe(200);
    expect((await loadedPackages()).filter((p) => NOT_AT_IDLE.includes(p))).toEqual([]);
  });
});

describe('the first start of a standalone control plane, which makes its dev PKI (ADR 0048)', () => {
  let dir: string;
  let plane: EntryPoint;

  beforeAll(async () => {
    dir = tempDir('ql-footprint-first-');
    plane = new EntryPoint(CONTROL_PLANE, {
      QL_ADMIN_PORT: '0',
      QL_INGRESS_PORT: '0',
      QL_DATABASE_URL: `sqlite:${join(dir, 'ql.sqlite')}`,
      QL_DEV_PKI: 'true',
      QL_DEV_PKI_DIR: join(dir, 'pki'),
      QL_LOG_LEVEL: 'warn',
      NODE_OPTIONS: `--require ${join(ROOT, 'test', 'support', 'loaded-packages-probe.js')}`,
    });
    await plane.until(
      'control plane ready',
      async () => plane.lines.find((l) => l.msg === 'control plane ready'),
      { deadlineMs: 60_000 },
    );
  });
  afterAll(async () => {
    if (plane?.running) {
      plane.kill('SIGTERM');
      await plane.exited;
    }
    rmSync(dir, { recursive: true, force: true });
  });

  it('has its certificates made by a process of their own: it never loads the certificate library', async () => {
    const before = plane.lines.length;
    plane.kill('SIGUSR2');
    const probe = await plane.until('the loaded packages probe', async () =>
      plane.lines.slice(before).find((l) => l.msg === 'loaded packages probe'),
    );
    expect((probe as unknown as { packages: string[] }).packages).not.toContain('@peculiar/x509');
    // The PKI it made is the one it serves: worker-1's new certificate registers over mTLS.
    const pkiDir = join(dir, 'pki');
    const worker = join(pkiDir, 'workers', 'worker-1');
    const ready = plane.lines.find((l) => l.msg === 'control plane ready')!;
    const res = await postIngress(
      String(ready.ingress),
      { ca: join(pkiDir, 'ca.crt'), cert: `${worker}.crt`, key: `${worker}.key` },
      ingressPath('worker-1', newSessionId(), 'register'),
      registerBody(),
    );
    expect(res.status).toBe(200);
  });
});
