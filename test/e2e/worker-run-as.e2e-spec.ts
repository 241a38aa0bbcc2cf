/**
 * Issue 15 item 9, ADR 0031: a task must not be able to act as its worker. A real worker process
 * with QL_WORKER_RUN_AS=nobody (65534), started as root with only the capabilities the deployments
 * give it (bounding set SETUID, SETGID, KILL, CHOWN; `setpriv` stands in for Docker's cap_drop/cap_add,
 * systemd's CapabilityBoundingSet and the Kubernetes securityContext), runs a node task that tries what
 * the review's task did: read the worker's TLS key, its /proc/<pid>/environ, the journal and its own
 * lease token in it. The same task on a worker without the setting (the quickstart)
 * shows what it reaches there, as docs/operations.md says. A bundle's run (ADR 0051) owns its copy,
 * also when it is the spare copy made ahead (issue 19).
 *
 * Switching users needs root: the suite asserts it runs as root (as here and in CI) instead of
 * passing without having checked anything.
 */
import { chmodSync, existsSync, mkdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { bundleOf } from '../support/bundle-fixtures';
import { WORKER_EXIT } from '@ql/contracts';
import { RemoteRunHarness, RunWorker, attemptProcesses, eventually } from '../support/remote-run-harness';
import { DEPLOYED_CAPS, fromReachableCheckout } from '../support/run-as-launcher';

// Real worker processes: a start takes seconds on a loaded machine, a run several of them.
jest.setTimeout(180_000);

const NOBODY = 65534;

/** What the review's task tried; prints one `REACH {…}` line: per target, its text or the error code. */
const PROBE_TASK = `
const fs = require('node:fs');
const path = require('node:path');
const attempt = (read) => { try { return { ok: true, text: String(read()) }; } catch (e) { return { ok: false, code: e.code }; } };
const journal = process.env.PROBE_JOURNAL;
const offer = path.basename(process.cwd());
const reach = {
  key: attempt(() => fs.readFileSync(process.env.PROBE_KEY, 'utf8')),
  workerEnviron: attempt(() => fs.readFileSync('/proc/' + process.ppid + '/environ', 'latin1')),
  journalFolder: attempt(() => fs.readdirSync(journal).join(',')),
  // Its own lease token, wherever the journal keeps it: any line of any file there naming this offer.
  ownToken: attempt(() => fs.readdirSync(journal)
    .flatMap((name) => fs.readFileSync(path.join(journal, name), 'latin1').split('\\n'))
    .map((line) => line.includes('"offerId":"' + offer + '"') && /"leaseToken":"([A-Za-z0-9_-]+)"/.exec(line))
    .find(Boolean)[1]),
  otherRunFolders: attempt(() => fs.readdirSync(path.dirname(process.cwd())).join(',')),
};
fs.writeFileSync('written-by-task.txt', 'hello');
const owner = (p) => { const s = fs.statSync(p); return { uid: s.uid, gid: s.gid, mode: s.mode & 0o777 }; };
const owners = { cwd: owner('.'), script: owner('task.js'), written: owner('written-by-task.txt') };
console.log('REACH ' + JSON.stringify({ uid: process.getuid(), gid: process.getgid(), groups: process.getgroups(), ppid: process.ppid, cwd: process.cwd(), reach, owners }));
`;

interface Reach {
  uid: number;
  gid: number;
  groups: number[];
  ppid: number;
  cwd: string;
  reach: Record<
    'key' | 'workerEnviron' | 'journalFolder' | 'ownToken' | 'otherRunFolders',
    { ok: boolean; text?: string; code?: string }
  >;
  /** Seen by the task itself: its folder goes once the run ended (ADR 0038). */
  owners: Record<'cwd' | 'script' | 'written', { uid: number; gid: number; mode: number }>;
}

describe('a task must not be able to act as its worker (QL_WORKER_RUN_AS)', () => {
  let h: RemoteRunHarness;

  beforeAll(async () => {
    expect({ testsRunAs: process.getuid!() }).toEqual({ testsRunAs: 0 }); // switching users needs root
    h = await RemoteRunHarness.start('sqlite', ['worker-a', 'worker-b', 'worker-q', 'worker-x']);
    // As /var/lib: the task user may pass through the folders above the work root (not list them).
    chmodSync(dirname(h.folder('x')), 0o711);
    mkdirSync(h.folder('checkout'), { mode: 0o755 });
  });
  afterEach(async () => {
    await h.stopWorkers(); // the next test's run must go to its own worker
  });
  afterAll(async () => {
    await h?.close();
  });

  /** Runs the probe task on `w` and returns what it reached, once the run ended. */
  async function probe(w: RunWorker): Promise<{ status: string; report: Reach }> {
    const taskId = await h.createTask({
      runtime: 'node',
      command: PROBE_TASK,
      env: { PROBE_KEY: h.pki.workers[w.workerId]!.keyPath, PROBE_JOURNAL: w.journalDir },
    });
    const runId = await h.trigger(taskId);
    const run = await h.untilRunEnds(runId);
    const line = (await h.output(runId)).split('\n').find((l) => l.startsWith('REACH '));
    if (!line)
      throw new Error(`no REACH line: ${JSON.stringify(run)}\n${await h.output(runId)}\n${h.transcripts()}`);
    return { status: run.status, report: JSON.parse(line.slice('REACH '.length)) as Reach };
  }

  it('as nobody, with only the deployed capabilities, a task reads neither the key, the worker environment nor the journal; the run succeeds; what it writes is its own', async () => {
    const w = h.startWorker('worker-a', { env: { QL_WORKER_RUN_AS: 'nobody' }, launcher: DEPLOYED_CAPS });
    await h.untilOnline(w);
    expect(w.lines.find((l) => l.msg === 'worker starting')?.runAs).toBe(`${NOBODY}:${NOBODY} (nobody)`);

    const { status, report } = await probe(w);
    expect(status).toBe('succeeded');
    expect(report).toEqual({
      uid: NOBODY,
      gid: NOBODY,
      groups: [NOBODY],
      ppid: w.pid, // the worker itself started it: the environ tried is the worker's
      cwd: expect.stringContaining(w.workDir),
      reach: {
        key: { ok: false, code: 'EACCES' },
        workerEnviron: { ok: false, code: 'EACCES' },
        journalFolder: { ok: false, code: 'EACCES' },
        ownToken: { ok: false, code: 'EACCES' },
        otherRunFolders: { ok: false, code: 'EACCES' },
      },
      owners: {
        written: expect.objectContaining({ uid: NOBODY, gid: NOBODY }),
        // The task's; the worker's group may only pass (spawn enters the folder before switching users).
        cwd: { uid: NOBODY, gid: 0, mode: 0o710 },
        script: { uid: NOBODY, gid: NOBODY, mode: 0o600 },
      },
    });
    const owner = (path: string) => ({
      uid: statSync(path).uid,
      gid: statSync(path).gid,
      mode: statSync(path).mode & 0o777,
    });
    expect(owner(w.workDir)).toEqual({ uid: 0, gid: 0, mode: 0o711 });
    // The run succeeded: its folder goes (ADR 0038).
    await eventually('the work folder removed', () => (existsSync(report.cwd) ? undefined : true));
  });

  it('as nobody, a bundle run owns its copy (the first copied, the next the spare renamed into place); what it writes reaches neither the cache nor the next run', async () => {
    const cache = h.folder('bundle-cache-run-as');
    const w = h.startWorker('worker-b', {
      env: { QL_WORKER_RUN_AS: 'nobody', QL_WORKER_BUNDLE_CACHE_DIR: cache },
      launcher: DEPLOYED_CAPS,
    });
    await h.untilOnline(w);
    const b = bundleOf({ 'data.txt': 'original\n' });
    const pushed = await h.t.admin('POST', '/api/v1/bundles', undefined, undefined, {
      rawBody: b.content,
      headers: { 'content-type': 'application/gzip' },
    });
    expect(pushed.status).toBe(200);
    const taskId = await h.createTask({
      runtime: 'shell',
      command: `test "$(cat data.txt)" = original && test "$(stat -c %u data.txt)" = ${NOBODY} && echo pristine && echo poisoned > data.txt`,
      bundle: { digest: b.digest },
    });
    for (let n = 1; n <= 2; n++) {
      const run = await h.untilRunEnds(await h.trigger(taskId));
      expect({ n, status: run.status, stdout: await h.output(run.id, 'stdout') }).toEqual({
        n,
        status: 'succeeded',
        stdout: 'pristine\n',
      });
      await eventually(`the spare copy after run ${n}`, () =>
        existsSync(join(cache, '.spare', b.digest)) ? true : undefined,
      );
    }
    expect(readFileSync(join(cache, b.digest, 'data.txt'), 'utf8')).toBe('original\n');
    expect(statSync(join(cache, b.digest, 'data.txt')).uid).toBe(0);
  });

  it('as nobody, a cancel still kills the whole run group (the worker and its reaper signal another uid: CAP_KILL)', async () => {
    const w = h.startWorker('worker-x', { env: { QL_WORKER_RUN_AS: 'nobody' }, launcher: DEPLOYED_CAPS });
    await h.untilOnline(w);
    const runId = await h.trigger(
      await h.createTask({ runtime: 'shell', command: 'echo ready; sleep 60 & sleep 60; wait' }),
    );
    const attemptId = await eventually(
      'the first output and both processes',
      async () => {
        const id = (await h.run(runId)).attempts[0]?.id;
        return id && (await h.output(runId)).includes('ready\n') && attemptProcesses(id).length >= 2
          ? id
          : undefined;
      },
      { context: () => h.transcripts() },
    );
    expect(new Set(attemptProcesses(attemptId).map((pid) => statSync(`/proc/${pid}`).uid))).toEqual(
      new Set([NOBODY]),
    );
    expect((await h.t.admin('POST', `/api/v1/runs/${runId}/cancel`)).status).toBe(200);
    expect((await h.untilRunEnds(runId)).status).toBe('cancelled');
    expect(attemptProcesses(attemptId)).toEqual([]);
  });

  it('unset (the quickstart): the same task runs as the worker and reads its key, its environment and the lease token in the journal', async () => {
    const w = h.startWorker('worker-q');
    await h.untilOnline(w);
    expect(w.lines.find((l) => l.msg?.startsWith("tasks run as the worker's own user"))?.level).toBe('warn');

    const { status, report } = await probe(w);
    expect(status).toBe('succeeded');
    const { reach } = report;
    expect({ uid: report.uid, ppid: report.ppid }).toEqual({ uid: process.getuid!(), ppid: w.pid });
    expect(reach.key).toEqual({ ok: true, text: expect.stringContaining('PRIVATE KEY') });
    expect(reach.workerEnviron.text?.split('\0')).toContain(
      `QL_WORKER_TLS_KEY=${h.pki.workers['worker-q']!.keyPath}`,
    );
    expect(reach.journalFolder).toMatchObject({ ok: true });
    expect(reach.ownToken).toEqual({ ok: true, text: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/) });
  });

  it.each<[string, Record<string, string>, string[], RegExp]>([
    [
      'an unknown user',
      { QL_WORKER_RUN_AS: 'no-such-user' },
      [],
      /QL_WORKER_RUN_AS=no-such-user: no such user/,
    ],
    ['uid 0', { QL_WORKER_RUN_AS: '0:0' }, [], /QL_WORKER_RUN_AS=0:0: tasks must not run as root/],
    [
      'a worker without CAP_SETUID',
      { QL_WORKER_RUN_AS: 'nobody' },
      ['setpriv', '--bounding-set=-all,+setgid,+kill,+chown', '--inh-caps=-all', '--ambient-caps=-all', '--'],
      /QL_WORKER_RUN_AS=nobody: the worker cannot switch to uid 65534 \(EPERM\)/,
    ],
    [
      'a non-root worker with ambient capabilities (they would pass on to its tasks)',
      { QL_WORKER_RUN_AS: 'nobody' },
      [
        'setpriv',
        '--reuid=1000',
        '--regid=1000',
        '--clear-groups',
        '--inh-caps=-all,+setuid,+setgid,+kill,+chown',
        '--ambient-caps=-all,+setuid,+setgid,+kill,+chown',
        '--',
      ],
      /QL_WORKER_RUN_AS=nobody: a run would hold capabilities \(CapPrm 0*e1\): give the worker no ambient capabilities/,
    ],
    [
      "the worker's own user",
      { QL_WORKER_RUN_AS: 'nobody' },
      ['setpriv', '--reuid=65534', '--regid=65534', '--clear-groups', '--'],
      /QL_WORKER_RUN_AS=nobody is the worker's own user \(uid 65534\)/,
    ],
  ])(
    'refuses to start with %s: exit 2 (configuration) and the reason',
    async (_what, env, launcher, message) => {
      // A worker started as another user runs from a view of the checkout that user can reach.
      const otherUser = launcher.some((a) => a.startsWith('--reuid='));
      const w = h.startWorker('worker-x', {
        env,
        launcher: otherUser ? fromReachableCheckout(h.folder('checkout'), launcher) : launcher,
      });
      expect(await w.exited).toEqual({ code: WORKER_EXIT.config, signal: null });
      expect(w.stderr.join('\n')).toMatch(message);
      expect(w.lines.filter((l) => l.msg === 'worker registered')).toEqual([]);
    },
  );
});
