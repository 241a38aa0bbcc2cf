// Issue 19 items 6–8 end to end (ADR 0050): a real worker process over real TLS runs a node script
// and a python3 script (inline, and from a bundle: ADR 0051) that read secrets from their environment
// and print them; the run log shows `***`; the bytes of the database (SQLite files; PostgreSQL
// relation and WAL files), the worker's journal and work folders and every log line of both sides
// hold no value. A run whose mapped secret is gone fails to start as `secrets_unavailable`, served
// nothing.
import { randomBytes } from 'node:crypto';
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { Client } from 'pg';
import { snapshotDatabase } from '../support/db-snapshot';
import { RemoteRunHarness, RunWorker, finishedEvent } from '../support/remote-run-harness';
import type { Dialect } from '../support/test-plane';
import { CapturedLog } from '../support/captured-log';
import { bundleOf } from '../support/bundle-fixtures';

jest.setTimeout(240_000);

/** Random, so a hit can only be this test's value. */
const COOKIE_1 = `pt_key=${randomBytes(16).toString('hex')};pt_pin=jd_one;`;
const COOKIE_2 = `pt_key=${randomBytes(16).toString('hex')};pt_pin=jd_two;`;
const TOKEN = `tok-${randomBytes(24).toString('base64url')}`;
const GONE = `gone-${randomBytes(16).toString('hex')}`;
const VALUES = [COOKIE_1, COOKIE_2, TOKEN, GONE];

/** Every file under `dir`, as bytes. */
function filesUnder(dir: string): Buffer[] {
  const out: Buffer[] = [];
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    const stat = statSync(path);
    if (stat.isDirectory()) out.push(...filesUnder(path));
    else if (stat.isFile()) out.push(readFileSync(path));
  }
  return out;
}

/** The on-disk bytes of this PostgreSQL database's relations and of the server's WAL (after a checkpoint). */
async function postgresFiles(url: string): Promise<Buffer[]> {
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    await client.query('CHECKPOINT');
    const rels = await client.query<{ path: string }>(
      `SELECT pg_relation_filepath(c.oid) AS path FROM pg_class c
       WHERE c.relkind IN ('r', 't', 'i', 'm') AND pg_relation_filepath(c.oid) IS NOT NULL`,
    );
    const wal = await client.query<{ name: string }>('SELECT name FROM pg_ls_waldir()');
    const paths = [...rels.rows.map((r) => r.path), ...wal.rows.map((w) => `pg_wal/${w.name}`)];
    const out: Buffer[] = [];
    for (const path of paths) {
      const res = await client
        .query<{ bytes: Buffer }>('SELECT pg_read_binary_file($1::text) AS bytes', [path])
        // A relation whose file is not there (dropped meanwhile) has no bytes to look at.
        .catch(() => ({ rows: [] as { bytes: Buffer }[] }));
      if (res.rows[0]?.bytes) out.push(res.rows[0].bytes);
    }
    if (out.length < rels.rows.length / 2) throw new Error('could not read the relation files');
    return out;
  } finally {
    await client.end();
  }
}

describe.each<Dialect>(['sqlite', 'postgres'])('secrets on a real worker process (%s)', (dialect) => {
  let h: RemoteRunHarness;
  let worker: RunWorker;
  const planeLog = new CapturedLog();
  let goneRunId: string;

  beforeAll(async () => {
    h = await RemoteRunHarness.start(
      dialect,
      ['worker-a'],
      { QL_SECRETS_KEY: randomBytes(32).toString('base64'), QL_LOG_LEVEL: 'debug' },
      { logger: planeLog },
    );
    for (const [name, value] of [
      ['jd-cookie-1', COOKIE_1],
      ['jd-cookie-2', COOKIE_2],
      ['api-token', TOKEN],
      ['gone', GONE],
    ])
      expect((await h.t.admin('POST', '/api/v1/secrets', { name, value })).status).toBe(201);
    // A run queued before any worker is up, pinning a revision that maps `gone`; then the task moves
    // on to a revision that does not, and `gone` is deleted: the pinned revision still maps it.
    const task = await h.createTask({
      runtime: 'shell',
      command: 'echo "$GONE"',
      secretEnv: { GONE: 'gone' },
    });
    goneRunId = await h.trigger(task);
    const next = await h.t.admin('PUT', `/api/v1/tasks/${task}`, {
      name: 'gone-task',
      runtime: 'shell',
      command: 'true',
    });
    expect(next.status).toBe(200);
    expect((await h.t.admin('DELETE', '/api/v1/secrets/gone')).status).toBe(200);
    worker = h.startWorker('worker-a', { env: { QL_WORKER_LOG_LEVEL: 'debug' } });
    await h.untilOnline(worker);
  });
  afterAll(async () => {
    await h?.close();
  });

  it('a node script reads JD_COOKIE (two secrets joined by &) and prints it; the log shows *** for the joined value and each cookie, across chunk boundaries', async () => {
    const command = [
      'const v = process.env.JD_COOKIE;',
      'console.log("cookie=" + v);',
      'console.log("first=" + v.split("&")[0]);',
      // One write, the value straddling the worker's 16 KiB output chunk boundary.
      'process.stdout.write("x".repeat(16384 - 9) + v + "\\n");',
      'console.error("err=" + v.split("&")[1]);',
    ].join('\n');
    const runId = await h.trigger(
      await h.createTask({ runtime: 'node', command, secretEnv: { JD_COOKIE: 'jd-cookie-1&jd-cookie-2' } }),
    );
    const run = await h.untilRunEnds(runId);
    expect(run.status).toBe('succeeded');
    const stdout = await h.output(runId, 'stdout');
    expect(stdout).toContain('cookie=***\n');
    expect(stdout).toContain('first=***\n');
    expect(stdout).toContain(`${'x'.repeat(16384 - 9)}***\n`);
    expect(await h.output(runId, 'stderr')).toBe('err=***\n');
    for (const value of VALUES) expect(stdout).not.toContain(value);
  });

  it('a python3 script reads API_TOKEN and prints it on both streams; the log shows ***', async () => {
    const command = [
      'import os, sys',
      'print("token=" + os.environ["API_TOKEN"], flush=True)',
      'print(os.environ["API_TOKEN"][:10] + "|" + os.environ["API_TOKEN"][10:], file=sys.stderr)',
    ].join('\n');
    const runId = await h.trigger(
      await h.createTask({ runtime: 'python', command, secretEnv: { API_TOKEN: 'api-token' } }),
    );
    const run = await h.untilRunEnds(runId);
    expect(run.status).toBe('succeeded');
    expect(await h.output(runId, 'stdout')).toBe('token=***\n');
    // A value the script altered is not the value: redaction cannot know it (documented).
    expect(await h.output(runId, 'stderr')).toBe(`${TOKEN.slice(0, 10)}|${TOKEN.slice(10)}\n`);
  });

  it('scripts from a bundle (node and python3, issue 19 items 1-3 with 6-7) read their secrets and print them: the log shows ***', async () => {
    const bundle = bundleOf({
      'scripts/jd_bean.js': 'console.log("bean cookie=" + process.env.JD_COOKIE);\n',
      'scripts/sign.py': 'import os\nprint("sign token=" + os.environ["API_TOKEN"], flush=True)\n',
    });
    const pushed = await h.t.admin('POST', '/api/v1/bundles', undefined, undefined, {
      rawBody: bundle.content,
      headers: { 'content-type': 'application/gzip' },
    });
    expect(pushed.status).toBe(200);
    const pin = { digest: bundle.digest, workdir: 'scripts' };
    const node = await h.trigger(
      await h.createTask({
        runtime: 'shell',
        command: 'node jd_bean.js',
        bundle: pin,
        secretEnv: { JD_COOKIE: 'jd-cookie-1&jd-cookie-2' },
      }),
    );
    const python = await h.trigger(
      await h.createTask({
        runtime: 'shell',
        command: 'python3 sign.py',
        bundle: pin,
        secretEnv: { API_TOKEN: 'api-token' },
      }),
    );
    for (const [runId, line] of [
      [node, 'bean cookie=***\n'],
      [python, 'sign token=***\n'],
    ] as const) {
      const run = await h.untilRunEnds(runId);
      expect({ runId, status: run.status }).toEqual({ runId, status: 'succeeded' });
      expect(await h.output(runId, 'stdout')).toBe(line);
    }
  });

  it('a run whose pinned revision maps a deleted secret does not start: secrets_unavailable, nothing served', async () => {
    const run = await h.untilRunEnds(goneRunId);
    expect(run.status).toBe('failed');
    expect(finishedEvent(run, run.attempts[0]!.id)?.detail).toMatchObject({
      errorCode: 'secrets_unavailable',
    });
    expect(
      worker.lines.some((l) => l.msg === 'attempt could not start' && l.errorCode === 'secrets_unavailable'),
    ).toBe(true);
  });

  it('no value is in the database files, the worker’s journal or work folder, or any log line of either side', async () => {
    // The python run's stderr holds the token cut in two on purpose: only whole values are looked for.
    const blobs: Buffer[] = [];
    if (dialect === 'sqlite') blobs.push(...filesUnder(dirname(h.databaseUrl.slice('sqlite:'.length))));
    else blobs.push(...(await postgresFiles(h.databaseUrl)));
    // Every row of every table as the database reads it back (PostgreSQL compresses long values on disk).
    blobs.push(Buffer.from(JSON.stringify(await snapshotDatabase(h.t.plane.core.db))));
    blobs.push(...filesUnder(worker.journalDir), ...filesUnder(worker.workDir));
    blobs.push(Buffer.from(worker.lines.map((l) => JSON.stringify(l)).join('\n') + worker.stderr.join('\n')));
    blobs.push(Buffer.from(planeLog.lines.join('\n')));
    expect(blobs.length).toBeGreaterThan(3);
    // What is looked at holds what was stored: the redacted output is found in it.
    expect(blobs.some((blob) => blob.includes(Buffer.from('first=***')))).toBe(true);
    expect(planeLog.lines.some((l) => l.includes('secrets delivered'))).toBe(true);
    for (const value of VALUES)
      for (const blob of blobs)
        expect({ value, found: blob.includes(Buffer.from(value)) }).toEqual({ value, found: false });
  });
});
