// Size: the run supervisor against one fake control plane, path by path (pull, activation, output, renewal, cancel, stop, fence, long poll).
import { RunActivationResponse, buildActivationResponse } from '@ql/contracts';
import { existsSync } from 'node:fs';
import { PassThrough } from 'node:stream';
import { FakeControlPlane, fenced, lostAnswer } from '../../test-support/fake-control-plane';
import { WorkerHarness } from '../../test-support/worker-harness';
import { groupAlive } from '../host/process-table';
import { readJournalLog } from '../journal/journal-log';
import { WorkerStopError } from '../lifecycle/worker-lifecycle.service';

let h: WorkerHarness;
let plane: FakeControlPlane;
const start = async (env: Record<string, string> = {}, leaseMs?: number, path?: string) => {
  plane = new FakeControlPlane(leaseMs);
  h = new WorkerHarness(plane, env, path);
  await h.lifecycle.start();
};
afterEach(() => h?.dispose());

/** The lease calls of the only lease, in order, as action names. */
const steps = () =>
  plane.calls
    .filter((c) => c.body.offerId && c.action !== 'offers' && c.action !== 'renew')
    .map((c) => c.action);
const completed = (n = 1) =>
  h.until(`${n} completion(s)`, () => plane.leaseList.filter((l) => l.completion).length >= n);
const pgidOf = (offerId: string) =>
  Number(
    String(plane.of('running').find((c) => c.body.offerId === offerId)!.body.executorHandle).split(':')[1],
  );
const record = (offerId: string) => h.journal.get(offerId);
/** The record as the journal's log last wrote it (readable once the worker closed its journal). */
const lastRecord = (offerId: string) =>
  readJournalLog(h.config.journalDir)
    .filter((r) => r.offerId === offerId)
    .at(-1);

describe('RunSupervisor: pull, activation, output, completion (R-WRK-2..3, R-ACT-1, R-CMP-1..2)', () => {
  it('runs a pulled shell task: starting, running, its output as logs from seq 0, completion succeeded; the journal ends finished without the token', async () => {
    await start({ QL_WORKER_RUNNING_REPORT_DELAY_MS: '0' }); // `running` at once (ADR 0047: running-report.spec.ts)
    plane.enqueue({ command: 'echo hello; echo oops >&2', env: { GREETING: 'hi' } });
    await completed();
    const [lease] = plane.leaseList;
    // Its output as logs calls, and what was still queued at the exit on the completion (ADR 0044).
    expect(steps().filter((s) => s !== 'logs')).toEqual(['starting', 'running', 'completion']);
    expect(lease!.logs.map((l) => l.seq)).toEqual(lease!.logs.map((_, i) => i));
    expect(lease!.logs.map((l) => l.text).join('')).toMatch(/hello\n/);
    expect(lease!.logs.map((l) => l.text).join('')).toMatch(/oops\n/);
    expect(lease!.completion).toEqual({ outcome: 'succeeded', exitCode: 0, errorSummary: null });
    await h.until('completion acknowledged', () => h.messages().includes('attempt completed'));
    expect(await record(lease!.offerId)).toMatchObject({
      state: 'completion_acknowledged',
      leaseToken: null,
      outcome: { status: 'succeeded', exitCode: 0 },
    });
    // A fresh UUIDv7 offer id and a ≥ 256-bit base64url token; every call carried the session's current version.
    const pull = plane.of('offers')[0]!.body;
    expect(pull.leaseToken).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(plane.maxInflight).toBe(1);
    expect(h.messages()).not.toContain('worker session fenced; stopping without re-registering');
  });

  it('a non-zero exit is completed failed with its exit code and a short summary', async () => {
    await start();
    plane.enqueue({ command: 'echo bad; exit 3' });
    await completed();
    expect(plane.leaseList[0]!.completion).toEqual({
      outcome: 'failed',
      exitCode: 3,
      errorSummary: 'exited with code 3',
    });
  });

  it('a task past its timeout is killed (the whole group) and completed timed_out', async () => {
    await start();
    plane.enqueue({ command: 'sleep 30 & echo started; wait', timeoutMs: 1000 });
    await completed();
    const [lease] = plane.leaseList;
    expect(lease!.completion).toEqual({
      outcome: 'timed_out',
      exitCode: null,
      errorSummary: 'killed after its 1000 ms timeout',
    });
    expect(groupAlive(pgidOf(lease!.offerId))).toBe(false);
  });

  it('a starting answer that says the attempt already ended spawns nothing and finishes the record', async () => {
    await start();
    plane.enqueue({ command: 'echo never' });
    plane.reply.starting = (c, p) => {
      const answer = p.accept(c) as RunActivationResponse;
      return buildActivationResponse('already_terminal', {
        ...answer.snapshot,
        attemptStatus: 'cancelled',
        runStatus: 'cancelled',
      });
    };
    const finished = await h.until('start_failed', async () => {
      const offerId = plane.leaseList[0]?.offerId;
      const r = offerId ? await record(offerId) : null;
      return r?.state === 'start_failed' && r;
    });
    expect(finished.leaseToken).toBeNull();
    expect(steps()).toEqual(['starting']);
    expect(existsSync(h.config.workDir)).toBe(false); // no work folder: nothing was launched
  });

  it('a runtime that is not installed is a start failure with its code, and the record ends start_failed', async () => {
    await start({}, undefined, '/nonexistent');
    plane.enqueue({ command: 'print(1)', runtime: 'python' });
    await h.until('start failure', () => plane.leaseList[0]?.startFailure);
    expect(plane.leaseList[0]!.startFailure).toBe('runtime_unavailable');
    expect(steps()).toEqual(['starting', 'start-failure']);
    const finished = await h.until('start_failed', async () => {
      const r = await record(plane.leaseList[0]!.offerId);
      return r?.state === 'start_failed' && r;
    });
    expect(finished.leaseToken).toBeNull();
  });

  it('pulls only with a free slot: one run at a time with one slot, and after an offer pulls again at once', async () => {
    await start({ QL_WORKER_MAX_CONCURRENT_RUNS: '2', QL_WORKER_PULL_INTERVAL_MS: '400' });
    let running = 0;
    let most = 0;
    const normal = (
      c: Parameters<NonNullable<FakeControlPlane['reply']['starting']>>[0],
      p: FakeControlPlane,
    ) => p.accept(c);
    plane.reply.starting = (c, p) => {
      most = Math.max(most, ++running);
      return normal(c, p);
    };
    plane.reply.completion = (c, p) => {
      running--;
      return normal(c, p);
    };
    for (let i = 0; i < 3; i++) plane.enqueue({ command: 'sleep 0.3' });
    await completed(3);
    expect(most).toBe(2);
    const pulls = plane.of('offers');
    // The first tick took two offers back to back (well inside the 400 ms interval), then stopped: no slot.
    expect(pulls[1]!.at - pulls[0]!.at).toBeLessThan(200);
    expect(plane.leaseList.map((l) => l.offerId)).toEqual([
      ...new Set(plane.leaseList.map((l) => l.offerId)),
    ]);
  });

  it('after an idle answer waits the pull interval before the next pull', async () => {
    await start({ QL_WORKER_PULL_INTERVAL_MS: '300' });
    await h.until('three pulls', () => plane.of('offers').length >= 3);
    const [a, b, c] = plane.of('offers');
    expect(b!.at - a!.at).toBeGreaterThanOrEqual(290);
    expect(c!.at - b!.at).toBeGreaterThanOrEqual(290);
  });

  it('pulls at once when it starts and whenever a run ends, not one pull interval later', async () => {
    await start({ QL_WORKER_PULL_INTERVAL_MS: '300000' });
    for (let i = 0; i < 3; i++) plane.enqueue({ command: 'echo next' });
    // One slot, an interval of five minutes: three runs complete only if each end asks for the next pull.
    await completed(3);
    expect(plane.leaseList).toHaveLength(3);
  });

  it('a lost offers answer is recovered by sending the same offer id and token again: one lease, one run', async () => {
    await start();
    plane.enqueue({ command: 'echo once' });
    let lost = false;
    plane.reply.offers = (c, p) => {
      const answer = p.accept(c);
      if (!lost && (answer as { status: string }).status === 'offered') {
        lost = true;
        throw lostAnswer(); // committed, but the answer never arrived
      }
      return answer;
    };
    await completed();
    const pulls = plane.of('offers');
    const first = pulls.findIndex((c) => plane.leases.has(c.body.offerId as string));
    const fence = ({ offerId, leaseToken }: Record<string, unknown>) => ({ offerId, leaseToken });
    expect(fence(pulls[first + 1]!.body)).toEqual(fence(pulls[first]!.body));
    expect(plane.leaseList).toHaveLength(1);
    expect(plane.of('starting')).toHaveLength(1);
    // After the replay, the next pull is a new offer id and token.
    await h.until('another pull', () => plane.of('offers').length > first + 2);
    const after = plane.of('offers')[first + 2]!.body;
    expect(after.offerId).not.toBe(pulls[first]!.body.offerId);
    expect(after.leaseToken).not.toBe(pulls[first]!.body.leaseToken);
  });

  it('a log chunk that got no answer is sent again with the same seq and text', async () => {
    await start();
    plane.enqueue({ command: 'echo one; sleep 0.2; echo two' });
    let failed = false;
    plane.reply.logs = (c, p) => {
      if (!failed) {
        failed = true;
        throw lostAnswer();
      }
      return p.accept(c);
    };
    await completed();
    const sent = plane.of('logs').map((c) => [c.body.seq, c.body.text]);
    expect(sent[0]).toEqual(sent[1]);
    expect(plane.leaseList[0]!.logs.map((l) => l.text).join('')).toBe('one\ntwo\n');
  });

  it('output is uploaded as the task wrote it (ESC, CR kept) but invalid UTF-8 and NUL, which become U+FFFD', async () => {
    await start();
    plane.enqueue({ command: "printf 'a\\033[1mb\\377c\\tz\\r\\000\\n'" });
    await completed();
    expect(plane.leaseList[0]!.logs.map((l) => l.text).join('')).toBe('a\u001b[1mb\uFFFDc\tz\r\uFFFD\n');
  });
});

/**
 * The shortest lease these tests hold: renewed a third into what is left of it, killed 0.5 s before
 * its end. 1.5 s left 1 s between a renewal and the kill, which a loaded machine (a second suite
 * beside this one) starved: the worker rightly killed runs the tests expected to succeed.
 */
const SHORT_LEASE_MS = 4_000;

describe('RunSupervisor: renewal and cancellation (R-WRK-4, R-RUN-5)', () => {
  it('an idle started worker holds its heartbeat and pull loops only; the renewal loop exists while a lease is held', async () => {
    await start({}, SHORT_LEASE_MS);
    await h.until('a pull', () => plane.of('offers').length > 0);
    const idleLoops = ['worker-heartbeat', 'worker-pull'];
    // At most these two are armed at any moment (one of them may be in its cycle, not armed).
    expect(h.scheduler.getTimeouts().every((n) => idleLoops.includes(n))).toBe(true);
    plane.enqueue({ command: 'sleep 0.6' });
    await h.until('renewal armed', () => h.scheduler.doesExist('timeout', 'worker-lease-renewal'));
    await completed();
    await h.until('no run held', () => h.runs.localRuns === 0);
    await h.until('renewal loop gone', () => !h.scheduler.doesExist('timeout', 'worker-lease-renewal'));
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(h.scheduler.getTimeouts().every((n) => idleLoops.includes(n))).toBe(true);
  });

  it.each([
    ['an hour behind', -3_600_000],
    ['an hour ahead of', 3_600_000],
  ])(
    'a control plane whose clock is %s the worker: expiries are read on the worker clock, renewed in time, the run succeeds',
    async (_, skewMs) => {
      plane = new FakeControlPlane(SHORT_LEASE_MS);
      plane.clockSkewMs = skewMs;
      h = new WorkerHarness(plane, {});
      await h.lifecycle.start();
      plane.enqueue({ command: 'sleep 3.5; echo done' });
      await completed();
      expect(plane.leaseList[0]!.completion).toMatchObject({ outcome: 'succeeded', exitCode: 0 });
      expect(plane.of('renew').length).toBeGreaterThanOrEqual(2);
    },
  );

  it('renews each held lease a third into its term on one loop; later calls carry the renewed version', async () => {
    await start({}, SHORT_LEASE_MS);
    plane.enqueue({ command: 'sleep 3.5; echo done' });
    await completed();
    const renewals = plane.of('renew');
    expect(renewals.length).toBeGreaterThanOrEqual(2);
    expect(renewals.map((c) => c.body.leaseVersion)).toEqual(renewals.map((_, i) => i));
    expect(plane.of('completion')[0]!.body.leaseVersion).toBe(plane.leaseList[0]!.version);
    expect(plane.maxInflight).toBe(1);
    // Renewals stop with the run: the loop is gone once no lease is held.
    await h.until('no renewal armed', () => h.runs.localRuns === 0);
    const count = plane.of('renew').length;
    await new Promise((resolve) => setTimeout(resolve, 400));
    expect(plane.of('renew')).toHaveLength(count);
  });

  it.each([
    ['the renew answer', SHORT_LEASE_MS, false],
    ['the heartbeat answer', 60_000, true],
  ])(
    'a cancel request in %s kills the exact process group and reports cancelled',
    async (_where, leaseMs, viaHeartbeat) => {
      await start({}, leaseMs);
      plane.heartbeatCancels = viaHeartbeat;
      plane.enqueue({ command: 'sleep 30 & echo started; wait' });
      const lease = await h.until('started', () => plane.leaseList.find((l) => l.logs.length > 0));
      const pgid = pgidOf(lease.offerId);
      expect(groupAlive(pgid)).toBe(true);
      const renewals = plane.of('renew').length;
      lease.cancelRequested = true;
      await completed();
      // Through the heartbeat, no renewal was needed (the lease term is a minute); through renew, one was.
      expect(plane.of('renew').length > renewals).toBe(!viaHeartbeat);
      expect(lease.completion).toMatchObject({ outcome: 'cancelled', exitCode: null });
      expect(groupAlive(pgid)).toBe(false);
    },
  );

  it('a renew refused with 409 (lease gone) kills the run and completes nothing', async () => {
    await start({}, SHORT_LEASE_MS);
    plane.enqueue({ command: 'sleep 30 & echo started; wait' });
    const lease = await h.until('started', () => plane.leaseList.find((l) => l.logs.length > 0));
    const pgid = pgidOf(lease.offerId);
    plane.reply.renew = () => {
      throw fenced('lease', 'lease_expired');
    };
    await h.until('run over', () => h.runs.localRuns === 0 && plane.of('renew').length > 0);
    expect(groupAlive(pgid)).toBe(false);
    expect(plane.of('completion')).toEqual([]);
    expect(await record(lease.offerId)).toMatchObject({
      state: 'completion_acknowledged',
      leaseToken: null,
      outcome: { errorCode: 'lease_lost' },
    });
    expect(h.lifecycle.currentState).toBe('online'); // a lost lease is not a fenced session
  });

  it('a renewal that gets no answer is retried only inside the term; past it the run is killed', async () => {
    await start({}, SHORT_LEASE_MS);
    plane.enqueue({ command: 'sleep 30 & echo started; wait' });
    const lease = await h.until('started', () => plane.leaseList.find((l) => l.logs.length > 0));
    plane.reply.renew = () => {
      throw lostAnswer();
    };
    await h.until('run over', () => h.runs.localRuns === 0);
    expect(groupAlive(pgidOf(lease.offerId))).toBe(false);
    expect(plane.of('renew').every((c) => c.at < lease.expiresAt)).toBe(true);
    expect(plane.of('renew').length).toBeGreaterThan(1);
    expect(plane.of('completion')).toEqual([]);
  });
});

describe('RunSupervisor: stop and fence (R-WRK-5, R-WRK-6)', () => {
  it('stop() stops pulling, waits for the local run to complete, then goes offline', async () => {
    await start({ QL_WORKER_MAX_CONCURRENT_RUNS: '2' }); // a free slot: only stop() keeps it from pulling
    plane.enqueue({ command: 'sleep 0.5; echo finished' });
    await h.until('running', () => plane.of('running').length === 1);
    const pulls = plane.of('offers').length;
    await h.lifecycle.stop();
    const order = plane.calls
      .map((c) => c.action)
      .filter((a) => ['drain', 'completion', 'offline'].includes(a));
    expect(order).toEqual(['drain', 'completion', 'offline']);
    expect(plane.of('offers')).toHaveLength(pulls);
    expect(h.lifecycle.currentState).toBe('stopped');
  });

  it('stop() cannot wait for a run to end: cancels it late in the budget, SIGKILL after the grace, reports it cancelled by the stop, then offline', async () => {
    // Budget 1200 ms, kill grace 1000 ms: cancelled at 600 ms, the grace shortened to 300 ms (SIGKILL at
    // 900 ms), 300 ms left to report and go offline.
    await start({ QL_WORKER_STOP_BUDGET_MS: '1200', QL_WORKER_KILL_GRACE_MS: '1000' });
    // It ignores SIGTERM, as its child does: only the SIGKILL after the grace ends it.
    plane.enqueue({ command: "trap '' TERM; sleep 30 & echo started; wait", name: '备份数据库' });
    const lease = await h.until('started', () => plane.leaseList.find((l) => l.logs.length > 0));
    const stopped = Date.now();
    await h.lifecycle.stop();
    expect(Date.now() - stopped).toBeLessThan(1200);
    expect(h.lifecycle.currentState).toBe('stopped');
    const order = plane.calls
      .map((c) => c.action)
      .filter((a) => ['drain', 'completion', 'offline'].includes(a));
    expect(order).toEqual(['drain', 'completion', 'offline']);
    expect(plane.of('completion')[0]!.at - stopped).toBeGreaterThanOrEqual(900); // after the grace
    expect(lease.completion).toEqual({
      outcome: 'cancelled',
      exitCode: null,
      errorSummary: 'killed because its worker was stopped before the run ended (worker_shutdown)',
    });
    expect(groupAlive(pgidOf(lease.offerId))).toBe(false);
    const said = h.lines.find((l) => String(l.msg).startsWith('stopping: cancelled run'));
    expect(said).toMatchObject({
      level: 'warn',
      msg: `stopping: cancelled run ${lease.runId} (备份数据库): it would outlast the worker's stop budget; SIGTERM now, SIGKILL after 300 ms, reported cancelled (worker_shutdown)`,
      task: '备份数据库',
      graceMs: 300,
    });
    // The journal is closed with the worker: its log says the record ended acknowledged.
    expect(lastRecord(lease.offerId)).toMatchObject({
      state: 'completion_acknowledged',
      outcome: { status: 'cancelled' },
    });
  });

  it('stop() cancels a run still fetching its bundle before anything is launched: a start failure worker_shutdown', async () => {
    await start({ QL_WORKER_STOP_BUDGET_MS: '1200' });
    let stalled: PassThrough | undefined;
    plane.serveBundle = () => (stalled = new PassThrough()); // headers came, then nothing
    plane.enqueue({ command: 'sh a.sh', bundle: { digest: 'a'.repeat(64), workdir: '.' } });
    await h.until('the bundle fetch going', () => stalled !== undefined);
    await h.lifecycle.stop();
    expect(stalled!.destroyed).toBe(true);
    expect(plane.of('start-failure').map((c) => c.body.errorCode)).toEqual(['worker_shutdown']);
    expect(plane.of('running')).toHaveLength(0);
    expect(plane.of('offline')).toHaveLength(1);
  });

  it("stop() past its budget (the cancelled run's completion gets no answer) kills the local runs and fails, saying why", async () => {
    await start({ QL_WORKER_STOP_BUDGET_MS: '600' });
    plane.enqueue({ command: 'sleep 30 & echo started; wait' });
    const lease = await h.until('started', () => plane.leaseList.find((l) => l.logs.length > 0));
    plane.reply.completion = () => {
      throw lostAnswer();
    };
    const error = await h.lifecycle.stop().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(WorkerStopError);
    expect((error as WorkerStopError).phase).toBe('local-runs');
    expect((error as Error).message).toBe(
      'stop did not finish within the stop budget of 600 ms during local-runs; killed 1 local run still going',
    );
    expect(groupAlive(pgidOf(lease.offerId))).toBe(false);
    expect(plane.of('completion').length).toBeGreaterThan(0); // tried, never answered
    expect(lease.completion).toBeUndefined();
    // Its lease may be live: the record stays for the next start to report (R-WRK-2), its token kept.
    expect(lastRecord(lease.offerId)).toMatchObject({
      state: 'running_acknowledged',
      leaseToken: lease.token,
      outcome: { status: 'cancelled', errorCode: 'worker_shutdown' },
    });
    expect(h.messages()).toContain(
      "attempt killed before its completion was acknowledged: the worker's stop ran out of time; the next start on this journal reports it",
    );
  });

  it('a fenced session stops pulling and kills its runs; nothing more is sent', async () => {
    await start();
    plane.enqueue({ command: 'sleep 30 & echo started; wait' });
    const lease = await h.until('started', () => plane.leaseList.find((l) => l.logs.length > 0));
    plane.reply.heartbeat = () => {
      throw fenced('session', 'session_replaced');
    };
    await expect(h.lifecycle.whenFenced()).resolves.toMatchObject({ reason: 'session_replaced' });
    await h.until('run over', () => h.runs.localRuns === 0);
    expect(groupAlive(pgidOf(lease.offerId))).toBe(false);
    const sent = plane.calls.length;
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(plane.calls).toHaveLength(sent);
    expect(plane.of('completion')).toEqual([]);
    // The lease is gone with the session: the record is finished here, nothing reported (ADR 0015).
    expect(readJournalLog(h.config.journalDir).find((r) => r.offerId === lease.offerId)).toMatchObject({
      state: 'completion_acknowledged',
      outcome: { errorCode: 'lease_lost' },
    });
  });
});

describe('RunSupervisor: long-poll pulls (ADR 0019)', () => {
  const LONG_POLL = { QL_WORKER_PULL_WAIT_MS: '10000', QL_WORKER_PULL_INTERVAL_MS: '60000' };

  it('keeps one held pull outstanding outside the call chain: heartbeats go on meanwhile, a run queued is taken at once', async () => {
    await start(LONG_POLL);
    await h.until('a pull held', () => plane.held.size === 1);
    expect(plane.of('offers').at(-1)!.body.waitMs).toBe(10_000);
    const beats = plane.of('heartbeat').length;
    await h.until('two heartbeats while the pull is held', () => plane.of('heartbeat').length >= beats + 2);
    expect(plane.held.size).toBe(1);
    plane.enqueue({ command: 'echo quick' });
    // The pull interval is a minute: only the held pull can have taken it this soon.
    await completed();
    // The slot busy, no pull went until the run ended; then one is held again.
    await h.until('a pull held again', () => plane.held.size === 1);
    expect(plane.of('offers')).toHaveLength(2);
  });

  it('stop() aborts the held pull at once and drains within its budget', async () => {
    await start(LONG_POLL);
    await h.until('a pull held', () => plane.held.size === 1);
    const started = Date.now();
    await h.lifecycle.stop();
    expect(Date.now() - started).toBeLessThan(2_000);
    expect(plane.held.size).toBe(0);
    expect(plane.of('drain')).toHaveLength(1);
    expect(plane.of('offline')).toHaveLength(1);
  });
});
