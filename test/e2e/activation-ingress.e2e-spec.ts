// Size: the activation flow over the real mTLS ingress (starting, running, logs, completion, replays,
// fences, unknown fields) on one running app per dialect.
import { IngressAction, RunActivationResponse, ingressPath, parseActivationResponse } from '@ql/contracts';
import { LeaseSweeperService } from '../../apps/control-plane/src/leases/lease-sweeper.service';
import { snapshotDatabase } from '../support/db-snapshot';
import { SUCCEEDED_RUN_EVENTS, newSessionId, registerBody } from '../support/fixtures';
import {
  LeaseHolder as Holder,
  IngressSession as Session,
  leaseFence,
  pullOffer as pullLeaseOffer,
} from '../support/lease-holder';
import {
  Dialect,
  HttpResult,
  TestDatabase,
  TestPlane,
  createTestDatabase,
  createTestPki,
  readPair,
  startTestPlane,
} from '../support/test-plane';

const TIMEOUT_MS = 120_000;
const GRACE_MS = 5_000;

describe.each<Dialect>(['sqlite', 'postgres'])(
  'activation through the mTLS worker ingress (%s)',
  (dialect) => {
    let db: TestDatabase;
    let pki: Awaited<ReturnType<typeof createTestPki>>;
    let t: TestPlane;
    let s: Session;
    let names = 0;

    beforeAll(async () => {
      db = await createTestDatabase(dialect);
      pki = await createTestPki(['worker-a']);
      t = await startTestPlane(db, pki, {
        QL_INGRESS_RATE_BURST: '100000',
        QL_SESSION_LEASE_MS: '600000',
        QL_RUN_DEADLINE_GRACE_MS: String(GRACE_MS),
      });
      const creds = readPair(pki.workers['worker-a']!);
      const sessionId = newSessionId();
      const res = await t.ingress(
        creds,
        ingressPath('worker-a', sessionId, 'register'),
        // Every test holds a lease of its own.
        registerBody({ maxConcurrentRuns: 16, availableSlots: 16 }),
      );
      expect(res.status).toBe(200);
      const { generation, version } = res.body as { generation: number; version: number };
      s = { workerId: 'worker-a', sessionId, creds, generation, version };
    });
    afterAll(async () => {
      await t?.close();
      await db?.dispose();
      pki?.remove();
    });

    const send = (action: IngressAction, body: unknown) =>
      t.ingress(s.creds, ingressPath(s.workerId, s.sessionId, action), body);
    const fenceOf = (h: Holder, leaseVersion = 0) => leaseFence(s, h, leaseVersion);
    /** One pull by worker-a under a new offer id and token: the offer it got and that token. */
    const pullOffer = () => pullLeaseOffer(t, s);
    /** A queued run of a new task, pulled by worker-a: the lease holder's offer and token. */
    const holdNewRun = async (timeoutMs = TIMEOUT_MS): Promise<Holder> => {
      const task = await t.admin('POST', '/api/v1/tasks', {
        name: `activation ${dialect} ${++names}`,
        command: 'echo hello',
        runtime: 'shell',
        timeoutMs,
      });
      expect(task.status).toBe(201);
      const run = await t.admin('POST', `/api/v1/tasks/${(task.body as { id: string }).id}/runs`, {});
      expect(run.status).toBe(201);
      const held = await pullOffer();
      expect(held.offer.run.runId).toBe((run.body as { run: { id: string } }).run.id);
      return held;
    };
    /** A 200 whose body the worker's own strict parser accepts. */
    const activation = (res: HttpResult): RunActivationResponse => {
      expect({ status: res.status, body: res.body }).toEqual({ status: 200, body: expect.anything() });
      return parseActivationResponse(res.raw);
    };
    const fenced = (res: HttpResult, reason: string) =>
      expect({ status: res.status, body: res.body }).toEqual({
        status: 409,
        body: { code: 'worker_lease_fenced', message: expect.any(String), reason },
      });
    const snapshot = () => snapshotDatabase(t.plane.core.db);

    it('starting, running, a log chunk and a successful completion end the run; an exact replay writes nothing', async () => {
      const h = await holdNewRun();
      const before = Date.now();
      const starting = activation(await send('starting', fenceOf(h)));
      expect(starting).toEqual({
        schema: 'qinglong/remote-run-activation@v1',
        status: 'applied',
        snapshot: {
          runId: h.offer.run.runId,
          attemptId: h.offer.run.attemptId,
          runStatus: 'dispatching',
          attemptStatus: 'starting',
          leaseVersion: expect.any(Number),
          leaseGeneration: 1,
          callbackSequence: 1,
          deadlineAt: expect.any(String),
          deadlineGraceMs: GRACE_MS, // the sweeper's grace: the worker has the attempt dead by deadline + grace (ADR 0028)
          startedAt: expect.any(String),
        },
      });
      // The deadline is the start plus the task's timeout (database time, so within a clock skew).
      const { deadlineAt, startedAt } = starting.snapshot;
      expect(Date.parse(deadlineAt!) - Date.parse(startedAt!)).toBe(TIMEOUT_MS);
      expect(Math.abs(Date.parse(startedAt!) - before)).toBeLessThan(60_000);

      const running = activation(
        await send('running', { ...fenceOf(h, starting.snapshot.leaseVersion), executorHandle: 'pid:4242' }),
      );
      expect(running).toMatchObject({
        status: 'applied',
        snapshot: {
          runStatus: 'running',
          attemptStatus: 'running',
          callbackSequence: 2,
          executorHandle: 'pid:4242',
        },
      });
      const version = running.snapshot.leaseVersion;

      const log = await send('logs', { ...fenceOf(h, version), seq: 0, text: 'hello\n' });
      expect({ status: log.status, body: log.body }).toEqual({
        status: 200,
        body: { outcome: 'stored', truncated: false },
      });
      const stored = await t.plane.core.db.many<{ text: string }>(
        'SELECT text FROM run_logs WHERE run_id = :runId',
        { runId: h.offer.run.runId },
      );
      expect(stored).toEqual([{ text: 'hello\n' }]);

      const completion = { ...fenceOf(h, version), outcome: 'succeeded', exitCode: 0 };
      const done = activation(await send('completion', completion));
      expect(done).toMatchObject({
        status: 'applied',
        snapshot: {
          runStatus: 'succeeded',
          attemptStatus: 'succeeded',
          callbackSequence: 3,
          finishedAt: expect.any(String),
        },
      });
      expect(done.snapshot).not.toHaveProperty('errorCode');

      const detail = await t.admin('GET', `/api/v1/runs/${h.offer.run.runId}`);
      expect(detail.status).toBe(200);
      const run = detail.body as {
        status: string;
        attempts: { status: string }[];
        events: { type: string }[];
      };
      expect(run.status).toBe('succeeded');
      expect(run.attempts.map((a) => a.status)).toEqual(['succeeded']);
      expect(run.events.map((e) => e.type)).toEqual(SUCCEEDED_RUN_EVENTS);

      // R-CMP-2: the exact replay answers the current state and writes nothing.
      const unchanged = await snapshot();
      const replay = activation(await send('completion', completion));
      expect(replay).toEqual({ ...done, status: 'already_terminal' });
      expect(await snapshot()).toEqual(unchanged);

      // Another outcome for the recorded completion is refused, and writes nothing either.
      fenced(
        await send('completion', { ...completion, outcome: 'failed', exitCode: 1 }),
        'acknowledgement_mismatch',
      );
      expect(await snapshot()).toEqual(unchanged);
    });

    it('refuses running before starting', async () => {
      const h = await holdNewRun();
      const unchanged = await snapshot();
      fenced(await send('running', { ...fenceOf(h), executorHandle: 'pid:1' }), 'attempt_not_starting');
      expect(await snapshot()).toEqual(unchanged);
    });

    it('refuses a completion under the token of a released lease, and writes nothing', async () => {
      const old = await holdNewRun();
      expect((await send('release', fenceOf(old))).status).toBe(200);
      // The same attempt again, under a new offer, token and lease generation.
      const current = await pullOffer();
      expect(current.offer.run.attemptId).toBe(old.offer.run.attemptId);
      const starting = activation(await send('starting', fenceOf(current)));
      const version = starting.snapshot.leaseVersion;
      activation(await send('running', { ...fenceOf(current, version), executorHandle: 'pid:7' }));

      const unchanged = await snapshot();
      fenced(
        await send('completion', { ...fenceOf(old, version), outcome: 'succeeded', exitCode: 0 }),
        'lease_not_active',
      );
      // The current token with another lease's offer id and generation is not a match either.
      fenced(
        await send('completion', {
          ...fenceOf(old, version),
          leaseToken: current.token,
          outcome: 'succeeded',
        }),
        'lease_token_mismatch',
      );
      expect(await snapshot()).toEqual(unchanged);
    });

    it.each<[IngressAction, Record<string, unknown>]>([
      ['starting', { cancel: true }],
      ['running', { executorHandle: 'pid:1', pid: 1 }],
      ['start-failure', { errorCode: 'spawn_failed', detail: 'x' }],
      ['completion', { outcome: 'succeeded', signal: 'SIGTERM' }],
      ['logs', { seq: 0, text: 'x', stream: 'stderr', fd: 2 }],
    ])('%s: an unknown field is a 400 naming it, and writes nothing', async (action, extra) => {
      const h = await holdNewRun();
      const unknown = Object.keys(extra).at(-1)!;
      const unchanged = await snapshot();
      const res = await send(action, { ...fenceOf(h), ...extra });
      expect({ status: res.status, body: res.body }).toEqual({
        status: 400,
        body: { code: 'invalid_worker_request', message: `${unknown}: unknown_field` },
      });
      expect(await snapshot()).toEqual(unchanged);
    });

    /** A held run acknowledged running: its holder and the lease version its calls carry. */
    const runningRun = async () => {
      const h = await holdNewRun();
      const version = activation(await send('starting', fenceOf(h))).snapshot.leaseVersion;
      activation(await send('running', { ...fenceOf(h, version), executorHandle: 'pid:4242' }));
      return { h, version };
    };

    it.each<[string, Record<string, unknown>, string]>([
      ['an unknown stream', { stream: 'fd3' }, 'stream: must_be_one_of:stdout|stderr|system'],
      ['a stream in capitals', { stream: 'STDERR' }, 'stream: must_be_one_of:stdout|stderr|system'],
      ['the view-only unknown', { stream: 'unknown' }, 'stream: must_be_one_of:stdout|stderr|system'],
      ['a null stream', { stream: null }, 'stream: must_be_one_of:stdout|stderr|system'],
      ['a numeric stream', { stream: 2 }, 'stream: must_be_one_of:stdout|stderr|system'],
      ['a NUL', { stream: 'stdout', text: 'a\u0000b' }, 'text: control_character'],
      ['a lone surrogate', { stream: 'stdout', text: 'cut \ud83d' }, 'text: unpaired_surrogate'],
    ])(
      'logs: %s is a 400 naming the field (ADR 0032), and writes nothing',
      async (_what, change, message) => {
        const { h, version } = await runningRun();
        const unchanged = await snapshot();
        const res = await send('logs', { ...fenceOf(h, version), seq: 0, text: 'x', ...change });
        expect({ status: res.status, body: res.body }).toEqual({
          status: 400,
          body: { code: 'invalid_worker_request', message },
        });
        expect(await snapshot()).toEqual(unchanged);
      },
    );

    it('logs: each chunk is stored as sent with its stream; the admin view neutralizes it, a chunk without a stream is unknown', async () => {
      const { h, version } = await runningRun();
      const raw = 'red \u001b[31mX\u001b[0m\rfake\u202egnp.exe a\u200bb\n';
      const chunks = [
        { stream: 'stdout', text: raw },
        { stream: 'stderr', text: `err ${raw}` },
        { text: 'from a worker before ADR 0032\n' },
      ];
      for (const [seq, chunk] of chunks.entries())
        expect((await send('logs', { ...fenceOf(h, version), seq, ...chunk })).body).toEqual({
          outcome: 'stored',
          truncated: false,
        });
      const stored = await t.plane.core.db.many<{ stream: string | null; text: string }>(
        'SELECT stream, text FROM run_logs WHERE run_id = :runId ORDER BY position',
        { runId: h.offer.run.runId },
      );
      expect(stored).toEqual([
        { stream: 'stdout', text: raw },
        { stream: 'stderr', text: `err ${raw}` },
        { stream: null, text: 'from a worker before ADR 0032\n' },
      ]);
      const view = await t.admin('GET', `/api/v1/runs/${h.offer.run.runId}/logs`);
      const shown = 'red \\u001b[31mX\\u001b[0m\\u000dfake\\u202egnp.exe a\\u200bb\n';
      expect(
        (view.body as { items: { stream: string; text: string }[] }).items.map((i) => [i.stream, i.text]),
      ).toEqual([
        ['stdout', shown],
        ['stderr', `err ${shown}`],
        ['unknown', 'from a worker before ADR 0032\n'],
      ]);
    });

    it('the sweeper times out an attempt past its deadline + grace, counts it, and a late completion writes nothing', async () => {
      const h = await holdNewRun();
      const starting = activation(await send('starting', fenceOf(h)));
      const running = activation(
        await send('running', { ...fenceOf(h, starting.snapshot.leaseVersion), executorHandle: 'pid:9' }),
      );
      const sweeper = t.plane.ingress.get(LeaseSweeperService);
      const timedOut = async () => (await sweeper.sweepOnce()).deadlines.timedOut;
      const counted = async () => {
        const res = await t.admin('GET', '/metrics', undefined, t.viewerToken);
        const line = res.raw
          .split('\n')
          .find((l) => l.startsWith('ql_sweeper_actions_total{action="deadline_timed_out"}'));
        return Number(line?.split(' ')[1] ?? 0);
      };
      const before = await counted();

      // The deadline moved into the past (the database's clock on PostgreSQL cannot be moved instead).
      const deadline = (agoMs: number) =>
        t.plane.core.db.run('UPDATE attempts SET deadline_at = {now + :shift} WHERE id = :id', {
          shift: -agoMs,
          id: h.offer.run.attemptId,
        });
      await deadline(GRACE_MS - 1_000);
      expect(await timedOut()).toBe(0);
      await deadline(GRACE_MS + 1);
      expect(await timedOut()).toBe(1);
      expect(await counted()).toBe(before + 1);

      const detail = await t.admin('GET', `/api/v1/runs/${h.offer.run.runId}`);
      expect(detail.body).toMatchObject({ status: 'timed_out', attempts: [{ status: 'timed_out' }] });
      const unchanged = await snapshot();
      expect(await timedOut()).toBe(0);
      const completion = {
        ...fenceOf(h, running.snapshot.leaseVersion),
        outcome: 'succeeded',
        exitCode: 0,
      };
      const late = activation(await send('completion', completion));
      expect(late).toMatchObject({
        status: 'already_terminal',
        snapshot: { attemptStatus: 'timed_out', errorCode: 'deadline_exceeded' },
      });
      // A late callback records one event and moves only the run's event sequence; a replay of it nothing.
      activation(await send('completion', completion));
      const after = await snapshot();
      expect(after.attempts).toEqual(unchanged.attempts);
      expect(after.run_leases).toEqual(unchanged.run_leases);
      expect(after.run_events!.length).toBe(unchanged.run_events!.length + 1);
    });
  },
);
