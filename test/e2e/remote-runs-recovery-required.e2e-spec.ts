/**
 * Issue 15 item 6, ADR 0029: restart recovery never reports an attempt ended while a process of it
 * may still run. The task does `exec env -i …` (as sudo/su do): its processes lose the
 * QL_ATTEMPT_ID marker. Its worker's reaper and then the worker itself are SIGKILLed, so nothing
 * kills the run's group. The worker restarted on the same journal finds the group alive and cannot
 * prove it is that attempt's (`not_ours`): before ADR 0029 it reported the attempt ended anyway and
 * pulled the next run. Now it reports nothing, puts the record in `recovery_required`, does not pull
 * (a second queued run stays queued), logs why, and the control plane shows it (admin worker view,
 * /metrics). The operator command (`journal list`, `journal resolve --all`, worker stopped) clears
 * it, and the next start pulls again.
 *
 * SQLite only: what is under test is the worker processes; the heartbeat field's storage on both
 * dialects is in test/contract/worker-session.contract.ts.
 */
import { existsSync, mkdirSync, readFileSync, readdirSync } from 'node:fs';
import { groupAlive } from '../../apps/worker/src/host/process-table';
import { WORKER_EXIT } from '@ql/contracts';
import { RemoteRunHarness, eventually, journalRecords } from '../support/remote-run-harness';
import { markerBeats } from '../support/marker-files';

// Real worker processes: a start takes seconds on a loaded machine, a run several of them.
jest.setTimeout(240_000);

/** The marker file the leftover appends a timestamp to every ~0.1 s (env -i: its path is an argument). */
const ESCAPING_TASK =
  'exec env -i PATH=/usr/bin:/bin sh -c \'while :; do date +%s%3N >> "$0"; sleep 0.1; done\' "$QL_MARKERS/$QL_ATTEMPT_ID.beats"';

/** The pids whose parent is `ppid` (field 4 of /proc/<pid>/stat). */
function childrenOf(ppid: number): number[] {
  const out: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'latin1');
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === ppid) out.push(Number(name));
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

describe('restart with a leftover group it cannot prove its own (sqlite)', () => {
  let h: RemoteRunHarness;
  let leftoverPgid: number | null = null;

  beforeAll(async () => {
    h = await RemoteRunHarness.start('sqlite', ['worker-a'], {
      // "Killed, then reported" needs the restart (two process starts: seconds on a loaded machine) to
      // report inside attempt 1's term: with 5 s the attempt came out lost under a second suite.
      QL_RUN_LEASE_MS: '20000',
    });
  });
  afterAll(async () => {
    if (leftoverPgid !== null) {
      try {
        process.kill(-leftoverPgid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
    await h?.close();
  });

  it('does not report the attempt, does not pull, says so in its log and the control plane; the journal command clears it', async () => {
    const markers = h.folder('markers');
    mkdirSync(markers);
    const beats = (attemptId: string): number[] => markerBeats(markers, attemptId);
    // A host without cgroups (ADR 0030): there, the attempt's cgroup would prove the leftover ours.
    const noCgroups = { QL_WORKER_CGROUP: 'off' };
    const w1 = h.startWorker('worker-a', { env: noCgroups });
    const first = await h.untilOnline(w1);
    const taskId = await h.createTask({
      runtime: 'shell',
      command: ESCAPING_TASK,
      env: { QL_MARKERS: markers },
    });
    const runId = await h.trigger(taskId);
    const { attemptId, record } = await eventually(
      'attempt 1 beating with its journal record running_acknowledged',
      async () => {
        const id = (await h.run(runId)).attempts[0]?.id;
        const r = journalRecords(w1.journalDir).find((x) => x.attemptId === id);
        return id && beats(id).length >= 3 && r?.state === 'running_acknowledged'
          ? { attemptId: id, record: r }
          : undefined;
      },
      { context: () => h.transcripts() },
    );
    leftoverPgid = record.process!.pgid;

    // The reaper (the worker's child that is not the run) first — its whole group, so its dead man's
    // switch (ADR 0028) goes too — then the worker: the run's group survives.
    const reapers = childrenOf(w1.pid).filter((pid) => pid !== record.process!.pid);
    expect(reapers).toHaveLength(1);
    process.kill(-reapers[0]!, 'SIGKILL');
    w1.kill('SIGKILL');
    await w1.exited;
    const seen = beats(attemptId).length;
    await eventually('the leftover beating on without its worker', () =>
      beats(attemptId).length > seen + 3 ? true : undefined,
    );

    // A second run waits in the queue.
    const secondRun = await h.trigger(await h.createTask({ runtime: 'shell', command: 'echo second run' }));

    const w2 = h.startWorker('worker-a', { journalDir: w1.journalDir, env: noCgroups });
    const second = await h.untilOnline(w2);
    expect(second.generation).toBe(first.generation + 1);
    const leftover = await w2.until('its leftover line', async () =>
      w2.lines.find((l) => l.msg === 'leftover process group of a crashed predecessor'),
    );
    expect(leftover).toMatchObject({ attemptId, verdict: 'not_ours', level: 'warn' });
    await w2.until('its not-pulling line', async () =>
      w2.lines.find((l) => l.msg === 'worker not pulling: a journal record needs recovery; heartbeats go on'),
    );
    expect(
      w2.lines.find(
        (l) =>
          l.msg === 'journal record needs recovery: this worker does not pull until an operator clears it',
      ),
    ).toMatchObject({
      offerId: record.offerId,
      reason: 'leftover_group_not_ours',
    });
    // No report of the attempt, the record waits for an operator.
    expect(w2.lines.filter((l) => l.msg === 'restart report acknowledged')).toEqual([]);
    expect(journalRecords(w1.journalDir).find((r) => r.offerId === record.offerId)).toMatchObject({
      state: 'recovery_required',
      recoveryReason: 'leftover_group_not_ours',
    });

    // The control plane knows (heartbeats carry it): the worker view and /metrics.
    const view = await eventually('the worker view showing it', async () => {
      const v = (await h.t.admin('GET', '/api/v1/workers/worker-a')).body as {
        recoveryRequired?: number;
        version: number;
      };
      return v.recoveryRequired === 1 ? v : undefined;
    });
    const metrics = (await h.t.admin('GET', '/metrics')).raw;
    expect(metrics).toContain('ql_workers_recovery_required 1\n');
    expect(metrics).toContain('ql_worker_journal_records_recovery_required 1\n');

    // It does not pull: five heartbeats later the second run is still queued, nothing was offered.
    await eventually('five more heartbeats', async () => {
      const v = await h.worker('worker-a');
      return v && v.version >= view.version + 5 ? v : undefined;
    });
    expect((await h.run(secondRun)).status).toBe('queued');
    expect(w2.lines.filter((l) => l.msg === 'offer accepted')).toEqual([]);

    // The journal command refuses to run beside the live worker (it holds the journal lock).
    const beside = await h.journalCommand('worker-a', w1.journalDir, ['list']);
    expect(beside.code).toBe(WORKER_EXIT.journalLocked);
    expect(beside.stderr.join('\n')).toMatch(/stop the worker first/);

    // The operator stops the worker, finds the leftover, ends it, lists and resolves the record.
    w2.kill('SIGTERM');
    expect((await w2.exited).code).toBe(WORKER_EXIT.ok);
    const listed = await h.journalCommand('worker-a', w1.journalDir, ['list']);
    expect(listed.code).toBe(0);
    expect(listed.stdout).toEqual([
      expect.stringMatching(
        new RegExp(
          `^${record.offerId} run ${runId} attempt ${attemptId} reason leftover_group_not_ours pid ${record.process!.pid} pgid ${leftoverPgid} since `,
        ),
      ),
      `1 journal record needs recovery in ${w1.journalDir}`,
    ]);
    process.kill(-leftoverPgid, 'SIGKILL');
    leftoverPgid = null;
    const unknown = await h.journalCommand('worker-a', w1.journalDir, ['resolve', runId]);
    expect(unknown).toMatchObject({
      code: 2,
      stderr: [expect.stringMatching(/no journal record .* needs recovery/)],
    });
    const elsewhere = h.folder('no-such-journal');
    expect(await h.journalCommand('worker-a', elsewhere, ['list'])).toMatchObject({ code: 2 });
    expect(existsSync(elsewhere)).toBe(false);
    expect((await h.journalCommand('worker-a', w1.journalDir, ['resolve'])).code).toBe(2);
    expect(journalRecords(w1.journalDir).filter((r) => r.state === 'recovery_required')).toHaveLength(1);
    const resolved = await h.journalCommand('worker-a', w1.journalDir, ['resolve', '--all']);
    expect(resolved.code).toBe(0);
    expect(resolved.stdout.at(-1)).toMatch(/^1 resolved/);
    expect(journalRecords(w1.journalDir).filter((r) => r.state === 'recovery_required')).toEqual([]);

    // The next start pulls again: the second run succeeds here; the control plane shows 0.
    const w3 = h.startWorker('worker-a', { journalDir: w1.journalDir, env: noCgroups });
    await h.untilOnline(w3);
    const run = await h.untilRunEnds(secondRun);
    expect(run.status).toBe('succeeded');
    expect(run.attempts.map((a) => a.workerId)).toEqual(['worker-a']);
    expect(
      ((await h.t.admin('GET', '/api/v1/workers/worker-a')).body as { recoveryRequired: number })
        .recoveryRequired,
    ).toBe(0);
    expect((await h.t.admin('GET', '/metrics')).raw).toContain('ql_workers_recovery_required 0\n');
    await h.stopWorkers();
  });

  it('where runs have cgroups (ADR 0030) the same leftover is proven ours by its cgroup: killed, then reported', async () => {
    const markers = h.folder('markers-cgroup');
    mkdirSync(markers);
    const beats = (attemptId: string) => markerBeats(markers, attemptId).length;
    const w1 = h.startWorker('worker-a'); // QL_WORKER_CGROUP=auto: this host delegates cgroup v2
    await h.untilOnline(w1);
    const runId = await h.trigger(
      await h.createTask({ runtime: 'shell', command: ESCAPING_TASK, env: { QL_MARKERS: markers } }),
    );
    const { attemptId, record } = await eventually('attempt 1 beating, running_acknowledged', async () => {
      const id = (await h.run(runId)).attempts[0]?.id;
      const r = journalRecords(w1.journalDir).find((x) => x.attemptId === id);
      return id && beats(id) >= 3 && r?.state === 'running_acknowledged'
        ? { attemptId: id, record: r }
        : undefined;
    });
    leftoverPgid = record.process!.pgid;
    const reapers = childrenOf(w1.pid).filter((pid) => pid !== record.process!.pid);
    expect(reapers).toHaveLength(1);
    process.kill(-reapers[0]!, 'SIGKILL');
    w1.kill('SIGKILL');
    await w1.exited;

    const w2 = h.startWorker('worker-a', { journalDir: w1.journalDir });
    await h.untilOnline(w2);
    const cgroupLine = await w2.until('its leftover cgroup line', async () =>
      w2.lines.find((l) => l.msg === "leftover cgroup of a crashed predecessor's attempt"),
    );
    expect(cgroupLine).toMatchObject({ attemptId, verdict: 'killed' });
    const groupLine = await w2.until('its leftover group line', async () =>
      w2.lines.find((l) => l.msg === 'leftover process group of a crashed predecessor'),
    );
    expect(groupLine).toMatchObject({ attemptId, verdict: 'gone' });
    await w2.until('its restart report', async () =>
      w2.lines.find((l) => l.msg === 'restart report acknowledged' && l.offerId === record.offerId),
    );
    // The leftover's group is gone (its processes carry no marker to look for: env -i).
    expect(groupAlive(record.process!.pgid)).toBe(false); // (zombies excepted: they run nothing)
    const after = beats(attemptId);
    expect(journalRecords(w1.journalDir).filter((r) => r.state === 'recovery_required')).toEqual([]);
    const run = await h.untilRunEnds(runId);
    expect(run.attempts[0]?.status).toBe('failed'); // reported by the restart: worker_restarted
    expect(beats(attemptId)).toBe(after);
    await h.stopWorkers();
  });
});
