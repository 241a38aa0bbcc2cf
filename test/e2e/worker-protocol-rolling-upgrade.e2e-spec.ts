/**
 * Issue 30 item 4 (ADR 0060, ADR 0062): a rolling upgrade through a whole cron day in fast time, with
 * real worker processes. The control plane's clock (which drives cron) moves 30 minutes per step over
 * 24 hours; the database keeps real time for leases, so real workers run each fire as it comes. Two
 * tasks: `整点签到`, every hour in Asia/Shanghai, for the machines labelled `site=hangzhou`; and
 * `京东签到`, at every odd hour (UTC), which maps a secret (wire v2 only). `router-hz` starts held
 * to v1 and is upgraded at noon (stopped, started again as a current worker: it registers 4);
 * `router-sh` is current all day. Every fire yields exactly one run, every run succeeds, the secret
 * runs only ever go to a v2 session, and the hourly runs go to v1 before noon and v2 after.
 * (The offer and the answers each session gets are checked call by call in the golden transcripts.)
 */
import { randomBytes } from 'node:crypto';
import { WORKER_EXIT } from '@ql/contracts';
import { CronTriggerService } from '../../apps/control-plane/src/runs/cron-trigger.service';
import { ManualClock } from '../support/fixtures';
import { RemoteRunHarness, RunWorker } from '../support/remote-run-harness';
import type { Dialect } from '../support/test-plane';

jest.setTimeout(600_000);

const MINUTE = 60_000;
const STEP = 30 * MINUTE;

interface Attempt {
  readonly workerId: string | null;
  readonly sessionId: string | null;
  readonly status: string;
}

// PostgreSQL only: there the database keeps its own time for sessions and leases while the control
// plane's clock drives cron. With SQLite the control plane's clock is the database's, so a day in
// fast time would expire every session at the first step.
describe.each<Dialect>(['postgres'])('a rolling upgrade through a cron day (%s)', (dialect) => {
  const clock = new ManualClock(Date.now());
  let h: RemoteRunHarness;

  beforeAll(async () => {
    h = await RemoteRunHarness.start(
      dialect,
      ['router-hz', 'router-sh'],
      { QL_SECRETS_KEY: randomBytes(32).toString('base64') },
      { clock },
    );
  });
  afterAll(async () => {
    await h?.close();
  });

  const runsOf = async (taskId: string) =>
    h.t.plane.core.db.many<{ id: string; status: string; scheduled_at: Date | string }>(
      `SELECT id, status, scheduled_at FROM runs WHERE task_id = :taskId ORDER BY scheduled_at`,
      { taskId },
    );
  const attemptsOf = async (runId: string) =>
    ((await h.t.admin('GET', `/api/v1/runs/${runId}`)).body as { attempts: Attempt[] }).attempts;
  const sessionOf = async (w: RunWorker) => (await h.untilOnline(w)).sessionId;

  it('every fire runs once and succeeds; secret runs only on v2 sessions; the hourly ones move from v1 to v2 at noon', async () => {
    let hz = h.startWorker('router-hz', {
      env: { QL_WORKER_PROTOCOL_MAX: '3', QL_WORKER_LABELS: 'site=hangzhou' },
    });
    const held = hz;
    const sh = h.startWorker('router-sh');
    const v1Session = await sessionOf(hz);
    const shSession = await sessionOf(sh);
    expect(
      (await h.t.admin('POST', '/api/v1/secrets', { name: 'jd-cookie', value: 'pt_key=京东' })).status,
    ).toBe(201);
    const hourly = await h.createTask({
      name: '整点签到',
      runtime: 'shell',
      command: 'echo 整点',
      cron: '0 * * * *',
      timezone: 'Asia/Shanghai',
      placement: { required: { labels: { site: 'hangzhou' } } },
    });
    const secret = await h.createTask({
      name: '京东签到',
      runtime: 'node',
      command: 'console.log("cookie " + process.env.JD_COOKIE)',
      // On whole hours only: no fire can fall between the task's creation and the day's first step.
      cron: '0 1-23/2 * * *',
      secretEnv: { JD_COOKIE: 'jd-cookie' },
    });
    const cron = h.t.plane.admin.get(CronTriggerService);
    // The day starts at the next whole hour of the database's clock (tasks never fire before they exist).
    const start = Math.ceil((Date.now() + 1) / (60 * MINUTE)) * 60 * MINUTE;
    let v2Session = '';
    for (let step = 0; step < 48; step++) {
      if (step === 24) {
        // Noon: router-hz is upgraded, one worker at a time (ADR 0060's upgrade order).
        hz.kill('SIGTERM');
        expect((await hz.exited).code).toBe(WORKER_EXIT.ok);
        hz = h.startWorker('router-hz', { env: { QL_WORKER_LABELS: 'site=hangzhou' } });
        v2Session = await sessionOf(hz);
        expect(await h.worker('router-hz')).toMatchObject({ protocolVersion: 4, wireVersion: 2 });
      }
      clock.set(start + step * STEP + 1_000);
      await cron.tick();
      for (const taskId of [hourly, secret])
        for (const run of await runsOf(taskId)) await h.untilRunEnds(run.id);
    }

    const hourlyRuns = await runsOf(hourly);
    const secretRuns = await runsOf(secret);
    expect(hourlyRuns).toHaveLength(24);
    expect(secretRuns).toHaveLength(12);
    const fires = (runs: { scheduled_at: Date | string }[]) =>
      runs.map((r) => new Date(r.scheduled_at).getTime());
    expect(fires(hourlyRuns)).toEqual(Array.from({ length: 24 }, (_, i) => start + i * 60 * MINUTE));
    expect(new Set(fires(secretRuns)).size).toBe(12);
    for (const run of [...hourlyRuns, ...secretRuns]) expect(run.status).toBe('succeeded');

    const sessions = async (runs: { id: string }[]) =>
      Promise.all(runs.map(async (r) => (await attemptsOf(r.id)).map((a) => a.sessionId)));
    // Each run once, on one attempt; the secret ones only on v2 sessions (router-hz's after noon too).
    const secretSessions = await sessions(secretRuns);
    expect(secretSessions.slice(0, 6)).toEqual(Array.from({ length: 6 }, () => [shSession]));
    for (const s of secretSessions.slice(6)) expect([[shSession], [v2Session]]).toContainEqual(s);
    const hourlySessions = await sessions(hourlyRuns);
    expect(hourlySessions.slice(0, 12)).toEqual(Array.from({ length: 12 }, () => [v1Session]));
    expect(hourlySessions.slice(12)).toEqual(Array.from({ length: 12 }, () => [v2Session]));
    expect(await h.output(secretRuns[0]!.id)).toBe('cookie ***\n');
    // No answer the v1 worker could not read, no session lost on either side.
    for (const w of [held, hz, sh])
      expect(w.transcript()).not.toMatch(/invalid_response|unknown_field|fenced/);
  });
});
