// ADR 0047 (issue 17): after the spawn the `running` report waits up to QL_WORKER_RUNNING_REPORT_DELAY_MS
// for the process to end. Ended, and its output fitting on the completion: only the completion goes,
// carrying the handle. Otherwise `running` goes as before; a cancel, the deadline or a lost lease in
// the wait are handled as at any other time.
import { FakeControlPlane, fenced } from '../../test-support/fake-control-plane';
import { WorkerHarness } from '../../test-support/worker-harness';
import { loadWorkerConfig } from '../config/worker-config';
import { groupAlive } from '../host/process-table';

let h: WorkerHarness;
let plane: FakeControlPlane;
afterEach(() => h?.dispose());

/** A wait no run of these tests outlives by accident, however loaded the machine. */
const LONG_WAIT = { QL_WORKER_RUNNING_REPORT_DELAY_MS: '5000' };

async function start(env: Record<string, string>, leaseMs?: number) {
  plane = new FakeControlPlane(leaseMs);
  h = new WorkerHarness(plane, env);
  await h.lifecycle.start();
}

/** The calls about the first lease, in order (renewals left out). */
const actions = () =>
  plane.calls
    .filter((c) => c.body.offerId === plane.leaseList[0]?.offerId && c.action !== 'renew')
    .map((c) => c.action);
const completion = () => plane.of('completion')[0]?.body;
const finished = () => h.until('attempt completed', () => h.lines.find((l) => l.msg === 'attempt completed'));
const startedRun = () =>
  h.until('the run started', async () => {
    const lease = plane.leaseList[0];
    const record = lease ? await h.journal.get(lease.offerId) : null;
    return record?.state === 'started' && { lease: lease!, pgid: record.process!.pgid };
  });

describe('the running report waits for a short run to end (ADR 0047)', () => {
  it('a run that ends within the wait sends only the completion, with the handle of its process and its output', async () => {
    await start(LONG_WAIT);
    plane.enqueue({ command: 'echo one; echo two >&2' });
    const line = await finished();
    const [lease] = plane.leaseList;
    expect(actions()).toEqual(['offers', 'starting', 'completion']);
    const record = (await h.journal.get(lease!.offerId))!;
    expect(completion()).toMatchObject({
      outcome: 'succeeded',
      exitCode: 0,
      errorSummary: null,
      executorHandle: `local-process:${record.process!.pgid}`,
      finalLogs: [
        { seq: 0, stream: 'stdout', text: 'one\n' },
        { seq: 1, stream: 'stderr', text: 'two\n' },
      ],
    });
    expect(record).toMatchObject({
      state: 'completion_acknowledged',
      leaseToken: null,
      outcome: { status: 'succeeded', exitCode: 0 },
    });
    expect(line).toMatchObject({ runningReported: false, logChunks: 2, finalLogChunks: 2 });
  });

  it('the default wait (20 ms) is configured; 0 sends running at once, as before', async () => {
    expect(loadWorkerConfig({}).runningReportDelayMs).toBe(20);
    await start({ QL_WORKER_RUNNING_REPORT_DELAY_MS: '0' });
    plane.enqueue({ command: 'true' });
    expect(await finished()).toMatchObject({ runningReported: true });
    expect(actions()).toEqual(['offers', 'starting', 'running', 'completion']);
    expect(completion()).not.toHaveProperty('executorHandle');
  });

  it('a run that outlives the wait sends running when it is over, then the completion without the handle', async () => {
    await start({ QL_WORKER_RUNNING_REPORT_DELAY_MS: '50' });
    // Long enough to outlive the wait on a loaded machine: the order of the calls is the property.
    plane.enqueue({ command: 'sleep 3' });
    await finished();
    expect(actions()).toEqual(['offers', 'starting', 'running', 'completion']);
    const [started, running] = [plane.of('starting')[0]!, plane.of('running')[0]!];
    expect(running.at - started.at).toBeGreaterThanOrEqual(50);
    expect(completion()).not.toHaveProperty('executorHandle');
  });

  it('a run that ended within the wait but printed more than a completion carries sends running, then its output, as before', async () => {
    await start(LONG_WAIT);
    plane.enqueue({ command: "head -c 150000 /dev/zero | tr '\\0' x" });
    await finished();
    const sent = actions();
    expect(sent.slice(0, 3)).toEqual(['offers', 'starting', 'running']);
    expect(sent.at(-1)).toBe('completion');
    expect(sent).toContain('logs');
    expect(completion()).not.toHaveProperty('executorHandle');
    expect(plane.leaseList[0]!.logs.map((l) => l.text).join('')).toBe('x'.repeat(150_000));
  });

  it('a cancel request in the wait kills the run, which is completed cancelled (here without running)', async () => {
    await start(LONG_WAIT);
    plane.enqueue({ command: 'sleep 30' });
    const { lease, pgid } = await startedRun();
    lease.cancelRequested = true; // the next heartbeat answer names it
    await finished();
    expect(actions()).toEqual(['offers', 'starting', 'completion']);
    expect(completion()).toMatchObject({ outcome: 'cancelled', executorHandle: `local-process:${pgid}` });
    expect(groupAlive(pgid)).toBe(false);
  });

  it('the deadline in the wait kills the run, which is completed timed_out (here without running)', async () => {
    await start(LONG_WAIT);
    plane.enqueue({ command: 'sleep 30', timeoutMs: 1000 });
    const { pgid } = await startedRun();
    await finished();
    expect(actions()).toEqual(['offers', 'starting', 'completion']);
    expect(completion()).toMatchObject({
      outcome: 'timed_out',
      errorSummary: 'killed after its 1000 ms timeout',
      executorHandle: `local-process:${pgid}`,
    });
    expect(groupAlive(pgid)).toBe(false);
  });

  it('a lease lost in the wait kills the run and reports nothing; the record is finished', async () => {
    await start(LONG_WAIT, 4_000);
    plane.enqueue({ command: 'sleep 30' });
    const { lease, pgid } = await startedRun();
    plane.reply.renew = () => {
      throw fenced('lease', 'lease_expired');
    };
    await h.until('run over', () => h.runs.localRuns === 0 && plane.of('renew').length > 0);
    expect(groupAlive(pgid)).toBe(false);
    expect(actions()).toEqual(['offers', 'starting']);
    expect(await h.journal.get(lease.offerId)).toMatchObject({ state: 'start_failed', leaseToken: null });
    expect(h.messages()).toContain('attempt ended without a completion: its lease is gone');
  });
});

describe('in a v1 session (ADR 0062)', () => {
  it('a short run reports running, its output goes as logs, and the completion carries neither handle nor output', async () => {
    await start({ ...LONG_WAIT, QL_WORKER_PROTOCOL_MAX: '3' });
    expect(plane.of('register')[0]?.body).toMatchObject({ protocolVersion: 3 });
    plane.enqueue({ command: 'echo 签到; echo 失败 >&2' });
    const line = await finished();
    expect(actions()).toEqual(['offers', 'starting', 'running', 'logs', 'logs', 'completion']);
    expect(plane.of('running')[0]?.body).toHaveProperty('executorHandle');
    expect(completion()).not.toHaveProperty('executorHandle');
    expect(completion()).not.toHaveProperty('finalLogs');
    expect(plane.of('logs').map((c) => [c.body.seq, c.body.text])).toEqual([
      [0, '签到\n'],
      [1, '失败\n'],
    ]);
    expect(line).toMatchObject({ runningReported: true, logChunks: 2, finalLogChunks: 0 });
  });
});
