import { createIdGenerator } from '@ql/contracts';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FakeControlPlane } from '../../test-support/fake-control-plane';
import { WorkerHarness } from '../../test-support/worker-harness';
import { PATH_TO, orphanRun } from '../../test-support/journal-fixtures';
import type { LocalRun } from '../executor/local-process.executor';
import { groupAlive } from '../host/process-table';
import type { JournalRecord } from '../journal/journal-record';
import { JournalState } from '../journal/journal-states';
import { WorkerJournal } from '../journal/worker-journal';

/** Set by a test to take this host's `/proc` away from the leftover check (as on a host without it). */
let mockNoProcFs = false;
jest.mock('../host/process-table', () => {
  const actual = jest.requireActual<typeof import('../host/process-table')>('../host/process-table');
  return { ...actual, hasProcFs: () => !mockNoProcFs && actual.hasProcFs() };
});

const ids = createIdGenerator();
let h: WorkerHarness;
let scratch: string;
const leftovers: LocalRun[] = [];
beforeEach(() => (scratch = mkdtempSync(join(tmpdir(), 'ql-restart-'))));
afterEach(async () => {
  mockNoProcFs = false;
  for (const run of leftovers.splice(0)) {
    run.cancel();
    await run.done;
  }
  await h?.dispose();
  rmSync(scratch, { recursive: true, force: true });
});

/** A process group a crashed predecessor left running, killed after the test if still there. */
async function leftoverGroup(attemptId: string): Promise<LocalRun> {
  const run = await orphanRun(scratch, attemptId);
  leftovers.push(run);
  return run;
}

/** What a crashed predecessor left in the journal folder: one record in `state`. */
async function crashedWith(
  dir: string,
  state: JournalState,
  opts: { alive?: boolean; exited?: boolean; unmarked?: boolean } = {},
): Promise<{ record: JournalRecord; pgid: number | null }> {
  const journal = new WorkerJournal({ dir, workerId: 'worker-a', maxRecords: 64 });
  await journal.open();
  const attemptId = ids.uuidV7();
  let record = await journal.accept({
    offerId: ids.uuidV7(),
    runId: ids.uuidV7(),
    attemptId,
    leaseGeneration: 1,
    leaseToken: randomBytes(32).toString('base64url'),
    specDigest: 'a'.repeat(64),
  });
  // `unmarked`: its processes lost the attempt marker (as after `exec env -i …`).
  const run = opts.alive ? await leftoverGroup(opts.unmarked ? ids.uuidV7() : attemptId) : null;
  for (const to of PATH_TO[state]) {
    record = await journal.transition(record.offerId, to, {
      ...(to === 'started' ? { process: run?.process ?? { pid: 999_999, pgid: 999_999, bootId: null } } : {}),
      ...(to === 'completion_acknowledged'
        ? { outcome: { status: 'succeeded', exitCode: 0, errorCode: null } }
        : {}),
      ...(to === 'recovery_required' ? { recoveryReason: 'launch_interrupted' } : {}),
    });
  }
  if (opts.exited) {
    record = await journal.update(record.offerId, {
      exit: { code: 0, signal: null },
      outcome: { status: 'succeeded', exitCode: 0, errorCode: null },
    });
  }
  await journal.close(); // the predecessor is gone; its record stays
  return { record, pgid: run?.pgid ?? null };
}

type Expect = {
  call: string | null;
  body?: Record<string, unknown>;
  after: JournalState;
  pulls: boolean;
};

describe('restart: each journal state found at start leads to what R-WRK-2 prescribes, before the first pull', () => {
  it.each<[JournalState, { alive?: boolean; exited?: boolean }, Expect]>([
    // ADR 0047: ended before its `running` report, the outcome recorded: the completion that stood
    // in for `running`, with the handle of the recorded process.
    [
      'started',
      { exited: true },
      {
        call: 'completion',
        body: {
          outcome: 'succeeded',
          exitCode: 0,
          errorSummary: null,
          executorHandle: 'local-process:999999',
        },
        after: 'completion_acknowledged',
        pulls: true,
      },
    ],
    ['accepted', {}, { call: 'release', after: 'start_failed', pulls: true }],
    [
      'starting_acknowledged',
      {},
      { call: 'start-failure', body: { errorCode: 'worker_restarted' }, after: 'start_failed', pulls: true },
    ],
    ['launching', {}, { call: null, after: 'recovery_required', pulls: false }],
    [
      'started',
      { alive: true },
      { call: 'start-failure', body: { errorCode: 'worker_restarted' }, after: 'start_failed', pulls: true },
    ],
    [
      'running_acknowledged',
      { alive: true },
      {
        call: 'completion',
        body: {
          outcome: 'failed',
          exitCode: null,
          errorSummary: 'reported after a worker restart (worker_restarted)',
        },
        after: 'completion_acknowledged',
        pulls: true,
      },
    ],
    [
      'running_acknowledged',
      { exited: true },
      {
        call: 'completion',
        body: { outcome: 'succeeded', exitCode: 0, errorSummary: null },
        after: 'completion_acknowledged',
        pulls: true,
      },
    ],
    ['completion_acknowledged', {}, { call: null, after: 'completion_acknowledged', pulls: true }],
    ['start_failed', {}, { call: null, after: 'start_failed', pulls: true }],
    ['recovery_required', {}, { call: null, after: 'recovery_required', pulls: false }],
  ])('%s (%o)', async (state, opts, expected) => {
    const plane = new FakeControlPlane();
    h = new WorkerHarness(plane, { QL_WORKER_JOURNAL_DIR: join(scratch, 'journal') });
    const { record, pgid } = await crashedWith(h.config.journalDir, state, opts);
    plane.adopt(record);
    let aliveAtReport: boolean | null = null;
    const spy = (c: Parameters<FakeControlPlane['accept']>[0], p: FakeControlPlane) => {
      aliveAtReport = pgid === null ? null : groupAlive(pgid);
      return p.accept(c);
    };
    plane.reply['start-failure'] = spy;
    plane.reply.completion = spy;
    plane.reply.release = spy;

    await h.lifecycle.start();
    // Everything the scan prescribes is done when start() returns: no pull came before it.
    const reports = plane.calls.filter((c) => c.body.offerId === record.offerId);
    expect(reports.map((c) => c.action)).toEqual(expected.call ? [expected.call] : []);
    if (expected.body)
      expect(reports[0]!.body).toMatchObject({ ...expected.body, leaseToken: record.leaseToken });
    expect(await h.journal.get(record.offerId)).toMatchObject({ state: expected.after });
    if (pgid !== null) {
      expect(aliveAtReport).toBe(false); // the leftover group was killed before the report
      expect(groupAlive(pgid)).toBe(false);
    }
    if (expected.pulls) {
      await h.until('a pull', () => plane.of('offers').length > 0);
    } else {
      await h.until('heartbeats go on', () => plane.of('heartbeat').length >= 3);
      expect(plane.of('offers')).toEqual([]);
      expect(h.messages()).toContain('worker not pulling: a journal record needs recovery; heartbeats go on');
    }
  });

  it.each<[JournalState, 'not_ours' | 'unverifiable']>([
    ['started', 'not_ours'],
    ['running_acknowledged', 'not_ours'],
    ['started', 'unverifiable'],
    ['running_acknowledged', 'unverifiable'],
  ])(
    '%s with a live leftover group judged %s: no report, recovery_required, no pull, heartbeats say so',
    async (state, verdict) => {
      const plane = new FakeControlPlane();
      h = new WorkerHarness(plane, { QL_WORKER_JOURNAL_DIR: join(scratch, 'journal') });
      // not_ours: its processes lost the marker; unverifiable: marked, but no /proc to read it.
      const { record, pgid } = await crashedWith(h.config.journalDir, state, {
        alive: true,
        unmarked: verdict === 'not_ours',
      });
      plane.adopt(record);
      mockNoProcFs = verdict === 'unverifiable';
      await h.lifecycle.start();
      expect(plane.calls.filter((c) => c.body.offerId === record.offerId)).toEqual([]);
      expect(await h.journal.get(record.offerId)).toMatchObject({
        state: 'recovery_required',
        recoveryReason: `leftover_group_${verdict}`,
      });
      expect(h.lines.find((l) => l.msg === 'leftover process group of a crashed predecessor')).toMatchObject({
        level: 'warn',
        verdict,
      });
      expect(groupAlive(pgid!)).toBe(true); // left alone: it may be someone else's
      // The heartbeats tell the control plane (one sent while the scan ran may not know yet).
      await h.until('heartbeats saying one record needs recovery', () =>
        plane.of('heartbeat').some((c) => c.body.recoveryRequired === 1),
      );
      await h.until('heartbeats go on', () => plane.of('heartbeat').length >= 3);
      expect(plane.of('offers')).toEqual([]);
      expect(plane.of('heartbeat').at(-1)!.body.recoveryRequired).toBe(1);
      expect(h.messages()).toContain('worker not pulling: a journal record needs recovery; heartbeats go on');
    },
  );

  it('a report the control plane refuses (the lease went with the old session) still finishes the record, and pulling starts', async () => {
    const plane = new FakeControlPlane(); // knows nothing of the old lease: 409 like lease_token_mismatch
    h = new WorkerHarness(plane, { QL_WORKER_JOURNAL_DIR: join(scratch, 'journal') });
    const { record } = await crashedWith(h.config.journalDir, 'running_acknowledged', { alive: true });
    await h.lifecycle.start();
    expect(plane.of('completion')).toHaveLength(1);
    expect(await h.journal.get(record.offerId)).toMatchObject({
      state: 'completion_acknowledged',
      leaseToken: null,
      outcome: { status: 'failed', errorCode: 'lease_lost' },
    });
    await h.until('a pull', () => plane.of('offers').length > 0);
  });

  it('in a v1 session a record that skipped running (ADR 0047) reports running with its handle first (ADR 0062)', async () => {
    const plane = new FakeControlPlane(); // knows nothing of the old lease: the first report is refused
    h = new WorkerHarness(plane, {
      QL_WORKER_JOURNAL_DIR: join(scratch, 'journal'),
      QL_WORKER_PROTOCOL_MAX: '3',
    });
    const { record } = await crashedWith(h.config.journalDir, 'started', { exited: true });
    await h.lifecycle.start();
    expect(plane.of('running').map((c) => c.body.executorHandle)).toEqual(['local-process:999999']);
    // v1 has no completion standing in for running: none went with a handle.
    expect(plane.of('completion').filter((c) => 'executorHandle' in c.body)).toEqual([]);
    expect(await h.journal.get(record.offerId)).toMatchObject({
      state: 'completion_acknowledged',
      outcome: { status: 'succeeded', errorCode: 'lease_lost' },
    });
  });

  it('a refused completion of a record that skipped running (ADR 0047) finishes it as a lost lease, with its outcome', async () => {
    const plane = new FakeControlPlane(); // knows nothing of the old lease
    h = new WorkerHarness(plane, { QL_WORKER_JOURNAL_DIR: join(scratch, 'journal') });
    const { record } = await crashedWith(h.config.journalDir, 'started', { exited: true });
    await h.lifecycle.start();
    expect(plane.of('completion').map((c) => c.body.executorHandle)).toEqual(['local-process:999999']);
    expect(await h.journal.get(record.offerId)).toMatchObject({
      state: 'completion_acknowledged',
      leaseToken: null,
      outcome: { status: 'succeeded', errorCode: 'lease_lost' },
    });
  });

  it('a journal held by a live worker process makes start() fail before any session is registered', async () => {
    const plane = new FakeControlPlane();
    h = new WorkerHarness(plane, { QL_WORKER_JOURNAL_DIR: join(scratch, 'journal') });
    const other = new WorkerJournal({ dir: h.config.journalDir, workerId: 'worker-a', maxRecords: 64 });
    await other.open();
    try {
      await expect(h.lifecycle.start()).rejects.toThrow(/is in use by worker worker-a/);
      expect(plane.calls).toEqual([]);
    } finally {
      await other.close();
    }
  });
});
