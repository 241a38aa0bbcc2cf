/**
 * kill -9 of a worker in the middle of a run (R-RUN-4, R-RUN-7, R-WRK-2): its reaper kills the run's
 * process group at once (the restart's leftover kill covers a reaper killed too: leftover-group.spec);
 * the worker restarted on the same journal finds the group gone and gets a new session. Back
 * before the lease expired, it ends the attempt itself (`failed`, `worker_restarted`, ADR 0015); back
 * after, the lease has expired and the attempt is `lost`. Either way the retry policy gives attempt 2
 * to a second worker, the run succeeds — and marker files the task writes prove the two attempts never
 * ran at the same time.
 *
 * SQLite only: what is under test is the worker processes and the order of events between them; the
 * control plane's lease expiry and retry on PostgreSQL are covered by the sweeper and lease e2e and
 * contract tests, and this file already takes ~20 s of wall time.
 */
import { mkdirSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { isFinished } from '../../apps/worker/src/journal/journal-states';
import {
  RemoteRunHarness,
  attemptProcesses,
  eventually,
  journalRecords,
} from '../support/remote-run-harness';
import { markerBeats } from '../support/marker-files';

// Real worker processes: a start takes seconds on a loaded machine, a run several of them.
jest.setTimeout(180_000);

/**
 * Long enough that the restarted worker (a process start: seconds on a loaded machine) kills the
 * orphan before the retry can start anywhere: the retry is due this long after the lease expired.
 */
const RETRY_BACKOFF_MS = 15_000;

/** The run lease of this file's control plane. */
const RUN_LEASE_MS = 20_000;

/**
 * Each attempt writes `<attemptId>.start`, then a timestamp (ms) every ~0.1 s to `<attemptId>.beats`,
 * then `<attemptId>.end`. The first attempt would beat for ~40 s (it is killed long before), later
 * ones for ~4 s. A killed attempt stops beating: its last beat is when it ended.
 */
const MARKER_TASK = [
  'm="$QL_MARKERS/$QL_ATTEMPT_ID"',
  'date +%s%3N > "$m.start"',
  'n=40; if [ ! -e "$QL_MARKERS/first" ]; then touch "$QL_MARKERS/first"; n=400; fi',
  'i=0',
  'while [ $i -lt $n ]; do date +%s%3N >> "$m.beats"; sleep 0.1; i=$((i+1)); done',
  'date +%s%3N > "$m.end"',
  'echo "attempt done"',
].join('\n');

describe('kill -9 of a worker during a run (sqlite)', () => {
  let h: RemoteRunHarness;
  let markers: string;

  beforeAll(async () => {
    // A long preference hold: while worker-b (site=b) is live with a free slot, worker-a leaves it the retry.
    h = await RemoteRunHarness.start('sqlite', ['worker-a', 'worker-b'], {
      QL_PLACEMENT_PREFERENCE_HOLD_MS: '60000',
      // "Back before the lease expired" needs a worker restart (two process starts: seconds on a
      // loaded machine) to fit inside one term: 5 s did not, under load (the attempt came out lost).
      QL_RUN_LEASE_MS: String(RUN_LEASE_MS),
    });
  });
  afterAll(async () => {
    await h?.close();
  });

  const beats = (attemptId: string): number[] => markerBeats(markers, attemptId);

  it.each([
    ['before its lease expired: it ends attempt 1 itself (failed, worker_restarted)', 'before', 'failed'],
    ['after its lease expired: attempt 1 is lost', 'after', 'lost'],
  ] as const)(
    'restarted %s; attempt 2 succeeds on another worker, never overlapping',
    async (_name, back, status) => {
      markers = h.folder(`markers-${back}`);
      mkdirSync(markers);
      const a1 = h.startWorker('worker-a', { env: { QL_WORKER_LABELS: 'site=a' } });
      const first = await h.untilOnline(a1);
      const taskId = await h.createTask({
        runtime: 'shell',
        command: MARKER_TASK,
        env: { QL_MARKERS: markers },
        retry: { maxAttempts: 2, initialBackoffMs: RETRY_BACKOFF_MS },
        placement: { preferred: [{ key: 'site', value: 'b', weight: 100 }] },
      });
      const runId = await h.trigger(taskId);

      // Attempt 1 runs on worker-a, beats, and the journal knows its process.
      const attempt1 = await eventually(
        'attempt 1 beating with its journal record running_acknowledged',
        async () => {
          const id = (await h.run(runId)).attempts[0]?.id;
          const record = journalRecords(a1.journalDir).find((r) => r.attemptId === id);
          return id && beats(id).length >= 3 && record?.state === 'running_acknowledged' ? id : undefined;
        },
        { context: () => h.transcripts() },
      );
      a1.kill('SIGKILL');
      expect(await a1.exited).toEqual({ code: null, signal: 'SIGKILL' });
      const killedAt = Date.now();
      // Its reaper killed the run's process group at once: no orphan runs on, restart or not.
      await eventually(
        'attempt 1 processes gone',
        () => (attemptProcesses(attempt1).length === 0 ? true : undefined),
        {
          deadlineMs: 5_000,
          pollMs: 20,
        },
      );
      const lastBeat1 = Math.max(...beats(attempt1));

      const b = h.startWorker('worker-b', { env: { QL_WORKER_LABELS: 'site=b' } });
      if (back === 'after') {
        // The lease term passes without a renewal: the sweeper ends the attempt as lost.
        await eventually(
          'attempt 1 lost',
          async () => ((await h.run(runId)).attempts[0]?.status === 'lost' ? true : undefined),
          {
            context: () => h.transcripts(),
          },
        );
      }
      const a2 = h.startWorker('worker-a', {
        journalDir: a1.journalDir,
        env: { QL_WORKER_LABELS: 'site=a' },
      });
      const second = await h.untilOnline(a2);
      await h.untilOnline(b);
      expect(second.sessionId).not.toBe(first.sessionId);
      expect(second.generation).toBe(first.generation + 1);

      // The restarted worker looked for the group its journal names before pulling: already gone.
      const leftover = await a2.until('its leftover line', async () =>
        a2.lines.find((l) => l.msg === 'leftover process group of a crashed predecessor'),
      );
      expect(leftover).toMatchObject({ attemptId: attempt1, verdict: 'gone' });
      expect(Math.max(...beats(attempt1))).toBe(lastBeat1);
      expect(lastBeat1).toBeLessThan(killedAt + 1_000);
      // Its report of attempt 1 is answered: applied (ADR 0015), or, once the sweeper had ended the
      // attempt, as a late callback that changes nothing but the event log.
      await a2.until('its restart report acknowledged', async () =>
        a2.lines.find((l) => l.msg === 'restart report acknowledged' && l.offerId !== undefined),
      );
      const run = await h.untilRunEnds(runId);
      expect({
        status: run.status,
        attempts: run.attempts.map((a) => ({ no: a.attemptNo, status: a.status, worker: a.workerId })),
      }).toEqual({
        status: 'succeeded',
        attempts: [
          { no: 1, status, worker: 'worker-a' },
          { no: 2, status: 'succeeded', worker: 'worker-b' },
        ],
      });
      expect(run.events.filter((e) => e.type === 'attempt.late_callback_ignored')).toHaveLength(
        back === 'after' ? 1 : 0,
      );
      const attempt2 = run.attempts[1]!.id;
      // Never at the same time: attempt 2 started after attempt 1's last beat, and ran to its end.
      const start2 = Number(readFileSync(join(markers, `${attempt2}.start`), 'utf8'));
      expect(start2).toBeGreaterThan(Math.max(...beats(attempt1)));
      expect(beats(attempt2)).toHaveLength(40);
      expect(() => statSync(join(markers, `${attempt1}.end`))).toThrow();
      expect(await h.output(runId)).toContain('attempt done\n');

      // R-WRK-2: the record found at restart was handled (finished, token forgotten), in a private journal.
      const records = journalRecords(a1.journalDir);
      // (Kept, finished: retention prunes finished records only beyond QL_WORKER_JOURNAL_MAX_RECORDS.)
      expect(records.filter((r) => r.attemptId === attempt1).map((r) => isFinished(r.state))).toEqual([true]);
      expect(records.filter((r) => r.leaseToken !== null)).toEqual([]);
      expect(statSync(a1.journalDir).mode & 0o777).toBe(0o700);
      const files = readdirSync(a1.journalDir);
      expect(files).toContain('journal.log');
      expect(files.map((name) => statSync(join(a1.journalDir, name)).mode & 0o777)).toEqual(
        files.map(() => 0o600),
      );
      expect(a2.running && b.running).toBe(true);
      await h.stopWorkers();
    },
  );
});
