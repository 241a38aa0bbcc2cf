/**
 * ADR 0028, worker-side lease enforcement: one attempt of a run executes at a time ON THE WORKER'S
 * HOST too. Each scenario is what an unlucky operator or a hostile path does to the worker that runs
 * attempt 1 — a wall clock that steps, a frozen worker, a path that swallows packets or delays the
 * answers, a task that ignores SIGTERM, a deadline sweep with no grace — with real worker processes
 * and a task that appends a timestamp to a marker file every 0.1 s. The property is checked on the
 * host's own evidence: attempt 1's last beat comes before the end of its lease as the database holds
 * it (or before the deadline sweep), so it never overlaps attempt 2's first beat.
 *
 * SQLite only: the lease end is read from the database file; what is under test is the worker.
 */
import Database from 'better-sqlite3';
import { appendFileSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from '../support/entry-points';
import {
  RemoteRunHarness,
  RunView,
  RunWorker,
  attemptProcesses,
  eventually,
} from '../support/remote-run-harness';
import { markerBeats } from '../support/marker-files';
import { TcpFaultProxy } from '../support/tcp-fault-proxy';

jest.setTimeout(180_000);

const CLOCK_SHIFT = join(ROOT, 'test/support/clock-shift-preload.js');

/**
 * `npm run bench -- lease-enforcement` runs this file with QL_LEASE_MARGINS_FILE set and reports,
 * per scenario, how long before the lease end (or deadline sweep) attempt 1's last beat came.
 */
function recordMargin(scenario: string, endMs: number, lastBeatMs: number): void {
  const file = process.env.QL_LEASE_MARGINS_FILE;
  if (!file) return;
  appendFileSync(file, `${JSON.stringify({ scenario, endMs, lastBeatMs, marginMs: endMs - lastBeatMs })}\n`);
}

/** One number the control plane's SQLite database holds (read-only, beside the running plane). */
function dbNumber(h: RemoteRunHarness, sql: string, id: string): number {
  const db = new Database(h.databaseUrl.slice('sqlite:'.length), { readonly: true, fileMustExist: true });
  try {
    return (db.prepare(sql).get(id) as { n: number }).n;
  } finally {
    db.close();
  }
}

/** The lease's end as the database holds it (the last term a renewal granted). */
const leaseEnd = (h: RemoteRunHarness, attemptId: string) =>
  dbNumber(h, 'SELECT MAX(expires_at) AS n FROM run_leases WHERE attempt_id = ?', attemptId);

/**
 * `<attemptId>.start`, then a beat every ~0.1 s in `<attemptId>.beats`: 100 beats (~10 s, two lease
 * terms) for the first attempt of a test, 20 for later ones. `QL_IGNORE_TERM=1`: the whole group
 * ignores SIGTERM (only SIGKILL ends it).
 */
const MARKER_TASK = [
  '[ "$QL_IGNORE_TERM" = 1 ] && trap "" TERM',
  'm="$QL_MARKERS/$QL_ATTEMPT_ID"',
  'date +%s%3N > "$m.start"',
  'n=20; if [ ! -e "$QL_MARKERS/first" ]; then touch "$QL_MARKERS/first"; n=100; fi',
  'i=0',
  'while [ $i -lt $n ]; do date +%s%3N >> "$m.beats"; sleep 0.1; i=$((i+1)); done',
  'echo "attempt done"',
].join('\n');

interface Scenario {
  readonly markers: string;
  readonly runId: string;
  readonly victim: RunWorker;
  readonly attempt1: string;
}

describe('worker-side lease enforcement (sqlite, real worker processes)', () => {
  let h: RemoteRunHarness;
  let n = 0;

  beforeAll(async () => {
    h = await RemoteRunHarness.start('sqlite', ['worker-a', 'worker-b']);
  });
  afterAll(async () => {
    await h?.close();
  });
  afterEach(async () => {
    await h.stopWorkers();
  });

  /** Starts worker-a (with `env`), runs the marker task on it until attempt 1 beats. */
  async function attemptOneBeating(
    env: Record<string, string>,
    task: Record<string, unknown> = {},
    taskEnv: Record<string, string> = {},
  ): Promise<Scenario> {
    const markers = h.folder(`markers-${++n}`);
    mkdirSync(markers);
    const victim = h.startWorker('worker-a', { env });
    await h.untilOnline(victim);
    const taskId = await h.createTask({
      runtime: 'shell',
      command: MARKER_TASK,
      env: { QL_MARKERS: markers, ...taskEnv },
      retry: { maxAttempts: 2, initialBackoffMs: 1000 },
      ...task,
    });
    const runId = await h.trigger(taskId);
    const attempt1 = await eventually(
      'attempt 1 beating on worker-a',
      async () => {
        const id = (await h.run(runId)).attempts[0]?.id;
        return id && markerBeats(markers, id).length >= 3 ? id : undefined;
      },
      { context: () => h.transcripts() },
    );
    return { markers, runId, victim, attempt1 };
  }

  /** Starts worker-b and waits until it ran attempt 2 of the scenario's run to success. */
  async function attemptTwoOnWorkerB(s: Scenario): Promise<RunView> {
    await h.untilOnline(h.startWorker('worker-b'));
    return h.untilRun(s.runId, 'attempt 2 succeeded', (r) => r.attempts[1]?.status === 'succeeded');
  }

  /**
   * The core property: attempt 1's processes were gone before its lease ended in the database (and
   * before `sweepAt`, when given), and attempt 2, if any, began after attempt 1's last beat.
   */
  async function neverTwoAtOnce(
    scenario: string,
    s: Scenario,
    run: RunView,
    sweepAt?: number,
  ): Promise<void> {
    await eventually('attempt 1 processes gone', () =>
      attemptProcesses(s.attempt1).length === 0 ? true : undefined,
    );
    const last1 = Math.max(...markerBeats(s.markers, s.attempt1));
    const end = Math.min(leaseEnd(h, s.attempt1), sweepAt ?? Infinity);
    recordMargin(scenario, end, last1);
    expect(last1).toBeLessThan(end);
    const attempt2 = run.attempts[1]?.id;
    if (attempt2) {
      const start2 = Number(readFileSync(join(s.markers, `${attempt2}.start`), 'utf8'));
      expect(start2).toBeGreaterThan(last1);
    }
  }

  it.each([
    ['backward by 40 s (an NTP correction)', -40_000],
    ['forward by 120 s (a router first syncing after booting in 1970)', 120_000],
  ])(
    'a wall clock stepped %s changes no lease term: the run succeeds as attempt 1',
    async (_what, stepMs) => {
      const shiftFile = h.folder(`clock-shift-${++n}`);
      writeFileSync(shiftFile, '0');
      const s = await attemptOneBeating({
        NODE_OPTIONS: `--require ${CLOCK_SHIFT}`,
        QL_TEST_CLOCK_SHIFT_FILE: shiftFile,
      });
      writeFileSync(shiftFile, String(stepMs));
      s.victim.kill('SIGUSR2');
      await s.victim.until('the clock step', async () =>
        s.victim.stderr.includes(`clock shifted by ${stepMs}`),
      );
      const b = h.startWorker('worker-b'); // ready to take an attempt 2, which must never be needed
      await h.untilOnline(b);
      const run = await h.untilRunEnds(s.runId);
      expect({ status: run.status, attempts: run.attempts.map((a) => [a.workerId, a.status]) }).toEqual({
        status: 'succeeded',
        attempts: [['worker-a', 'succeeded']],
      });
      expect(markerBeats(s.markers, s.attempt1)).toHaveLength(100);
    },
  );

  it('a frozen worker (SIGSTOP): the reaper kills attempt 1 before its lease ends; attempt 2 runs alone', async () => {
    const s = await attemptOneBeating({});
    s.victim.kill('SIGSTOP');
    try {
      const run = await attemptTwoOnWorkerB(s);
      expect(run.attempts.map((a) => [a.workerId, a.status])).toEqual([
        ['worker-a', 'lost'],
        ['worker-b', 'succeeded'],
      ]);
      await neverTwoAtOnce('frozen worker (SIGSTOP)', s, run);
      // On time, not merely before the lease end (which the worker's bound of it puts up to ~1 s
      // early): dead by the hard stop the frozen worker last armed, give or take half the 500 ms
      // margin for the reaper's `sleep` to wake. A switch 0.5 s late is dead 0.4 s after it or later.
      const armed = s.victim.lines.filter(
        (l) =>
          l.msg === "the attempt's hard stop: the reaper's switch kills it then" &&
          l.attemptId === s.attempt1,
      );
      const hardStop = Date.parse(String(armed.at(-1)?.hardStopAt));
      const last1 = Math.max(...markerBeats(s.markers, s.attempt1));
      expect(last1 - hardStop).toBeLessThan(250);
    } finally {
      s.victim.kill('SIGCONT');
    }
  });

  it('a path that swallows packets and a task that ignores SIGTERM: killed before the lease ends, not after a hung call', async () => {
    const proxy = await TcpFaultProxy.start(h.t.plane.ingressUrl);
    try {
      const s = await attemptOneBeating(
        { QL_WORKER_CONTROL_PLANE_URL: proxy.url, QL_WORKER_KILL_GRACE_MS: '1000' },
        {},
        { QL_IGNORE_TERM: '1' },
      );
      proxy.swallow();
      const run = await attemptTwoOnWorkerB(s);
      expect(run.attempts.map((a) => a.status)).toEqual(['lost', 'succeeded']);
      await neverTwoAtOnce('swallowed packets, SIGTERM ignored', s, run);
      await s.victim.until('the kill before the term', async () =>
        s.victim.lines.find(
          (l) => l.msg === "lease term ending without a renewal: killing the attempt's processes",
        ),
      );
    } finally {
      await proxy.close();
    }
  });

  it('answers delayed 4.5 s on their way back: the term is read from when the request left, never later', async () => {
    const proxy = await TcpFaultProxy.start(h.t.plane.ingressUrl);
    try {
      const s = await attemptOneBeating({
        QL_WORKER_CONTROL_PLANE_URL: proxy.url,
        QL_WORKER_REQUEST_TIMEOUT_MS: '8000',
      });
      proxy.delayAnswers(4_500);
      const run = await attemptTwoOnWorkerB(s);
      await neverTwoAtOnce('answers delayed 4.5 s', s, run);
    } finally {
      await proxy.close();
    }
  });
});

describe('worker-side lease enforcement: the deadline sweep with no grace (sqlite)', () => {
  let h: RemoteRunHarness;

  beforeAll(async () => {
    h = await RemoteRunHarness.start('sqlite', ['worker-a', 'worker-b'], { QL_RUN_DEADLINE_GRACE_MS: '0' });
  });
  afterAll(async () => {
    await h?.close();
  });

  it('a task that ignores SIGTERM past its timeout is dead before the sweeper may retry it', async () => {
    const markers = h.folder('markers');
    mkdirSync(markers);
    const a = h.startWorker('worker-a', { env: { QL_WORKER_KILL_GRACE_MS: '1000' } });
    const b = h.startWorker('worker-b', { env: { QL_WORKER_KILL_GRACE_MS: '1000' } });
    await Promise.all([h.untilOnline(a), h.untilOnline(b)]);
    const taskId = await h.createTask({
      runtime: 'shell',
      command: MARKER_TASK,
      env: { QL_MARKERS: markers, QL_IGNORE_TERM: '1' },
      timeoutMs: 3_000,
      retry: { maxAttempts: 2, initialBackoffMs: 1000 },
    });
    const runId = await h.trigger(taskId);
    const run = await h.untilRunEnds(runId);
    const [first, second] = run.attempts;
    expect(first?.status).toBe('timed_out');
    // Its whole group was gone by the deadline, when the sweeper may end the attempt and retry it.
    const deadline = dbNumber(h, 'SELECT deadline_at AS n FROM attempts WHERE id = ?', first!.id);
    const beats1 = markerBeats(markers, first!.id);
    recordMargin('deadline sweep with no grace, SIGTERM ignored', deadline, Math.max(...beats1));
    expect(Math.max(...beats1)).toBeLessThan(deadline);
    if (second) {
      const start2 = Number(readFileSync(join(markers, `${second.id}.start`), 'utf8'));
      expect(start2).toBeGreaterThan(Math.max(...beats1));
    }
  });
});
