// A real worker process runs what it pulls (R-WRK-1..5): a task created and triggered through the
// admin API ends `succeeded` with its output in the run log, on SQLite and PostgreSQL.
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { WORKER_EXIT } from '@ql/contracts';
import { WorkerProcess } from '../support/worker-process';
import { journalRecords } from '../support/remote-run-harness';
import {
  Dialect,
  TestDatabase,
  TestPlane,
  createTestDatabase,
  createTestPki,
  startTestPlane,
} from '../support/test-plane';

interface RunDetail {
  id: string;
  status: string;
  attempts: { id: string; status: string; workerId: string | null }[];
  events: { seq: number; type: string }[];
}
interface LogPage {
  items: { attemptId: string; seq: number; kind: string; text: string }[];
  runEnded: boolean;
  truncated: boolean;
}

describe.each<Dialect>(['sqlite', 'postgres'])(
  'a real worker process runs a triggered task (%s)',
  (dialect) => {
    let db: TestDatabase;
    let pki: Awaited<ReturnType<typeof createTestPki>>;
    let t: TestPlane;
    let worker: WorkerProcess | undefined;

    beforeAll(async () => {
      db = await createTestDatabase(dialect);
      pki = await createTestPki(['worker-a']);
      t = await startTestPlane(db, pki, { QL_SWEEP_INTERVAL_MS: '500' });
    });
    afterAll(async () => {
      if (worker?.running) {
        worker.kill('SIGKILL');
        await worker.exited;
      }
      await t?.close();
      await db?.dispose();
      pki?.remove();
    });

    it('creates and triggers a shell task through the admin API; the worker runs it, the run succeeds, its output is in the log; SIGTERM then exits 0', async () => {
      const journalDir = join(pki.dir, 'worker', 'journal');
      worker = new WorkerProcess({
        QL_PROFILE: 'worker',
        QL_WORKER_ID: 'worker-a',
        QL_WORKER_CONTROL_PLANE_URL: t.plane.ingressUrl,
        QL_WORKER_TLS_CA: pki.caCertPath,
        QL_WORKER_TLS_CERT: pki.workers['worker-a']!.certPath,
        QL_WORKER_TLS_KEY: pki.workers['worker-a']!.keyPath,
        QL_WORKER_HEARTBEAT_MS: '500',
        QL_WORKER_PULL_INTERVAL_MS: '100',
        QL_WORKER_JOURNAL_DIR: journalDir,
        QL_WORKER_WORK_DIR: join(pki.dir, 'worker', 'runs'),
      });
      const w = worker;
      await w.until(
        'worker registered and pulling',
        async () => w.messages().includes('journal scanned') || undefined,
      );

      const task = await t.admin('POST', '/api/v1/tasks', {
        name: `hello ${dialect}`,
        command: 'echo "hello from $QL_ATTEMPT_ID in $(basename "$PWD")"; echo "to stderr" >&2',
        runtime: 'shell',
        timeoutMs: 30_000,
      });
      expect(task.status).toBe(201);
      const trigger = await t.admin('POST', `/api/v1/tasks/${(task.body as { id: string }).id}/runs`, {});
      expect(trigger.status).toBe(201);
      const runId = (trigger.body as { run: { id: string } }).run.id;

      const run = await w.until(
        'the run ended',
        async () => {
          const res = await t.admin('GET', `/api/v1/runs/${runId}`);
          const detail = res.body as RunDetail;
          return ['queued', 'dispatching', 'running'].includes(detail.status) ? undefined : detail;
        },
        { pollMs: 100 },
      );
      expect(run.status).toBe('succeeded');
      expect(run.attempts).toEqual([expect.objectContaining({ status: 'succeeded', workerId: 'worker-a' })]);
      const attemptId = run.attempts[0]!.id;
      const types = run.events.map((e) => e.type);
      expect(types.indexOf('attempt.starting')).toBeGreaterThan(-1);
      expect(types.indexOf('attempt.starting')).toBeLessThan(types.indexOf('attempt.running'));

      const logs = (await t.admin('GET', `/api/v1/runs/${runId}/logs`)).body as LogPage;
      expect(logs.runEnded).toBe(true);
      expect(logs.truncated).toBe(false);
      const text = logs.items.map((i) => i.text).join('');
      // The attempt's marker and its own work folder (named by the offer id) reached the command.
      expect(text).toMatch(new RegExp(`^hello from ${attemptId} in [0-9a-f-]{36}\\n`, 'm'));
      expect(text).toMatch(/^to stderr\n/m);
      expect(logs.items.map((i) => i.seq)).toEqual(logs.items.map((_, i) => i));
      expect(logs.items.every((i) => i.attemptId === attemptId && i.kind === 'output')).toBe(true);

      await w.until(
        'completion acknowledged',
        async () => w.messages().includes('attempt completed') || undefined,
      );
      w.kill('SIGTERM');
      expect(await w.exited).toEqual({ code: WORKER_EXIT.ok, signal: null });
      // The journal keeps the finished record without its token; the lock went with the process.
      const files = readdirSync(journalDir);
      expect(files).not.toContain('journal.lock');
      expect(journalRecords(journalDir)).toEqual([
        expect.objectContaining({ attemptId, state: 'completion_acknowledged', leaseToken: null }),
      ]);
      expect(w.transcript()).not.toMatch(/leaseToken|PRIVATE KEY/);
    });
  },
);
