// Size: the activation flow over the real mTLS ingress (starting, running, logs, completion and the
// output it carries, replays, fences, unknown fields) on one running app per dialect.
import {
  IngressAction,
  RunActivationResponse,
  ingressBodyLimit,
  ingressPath,
  parseActivationResponse,
} from '@ql/contracts';
import { RUN_LOG_LIMITS } from '@ql/domain';
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
        registerBody({ maxConcurrentRuns: 32, availableSlots: 32 }),
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
      // The console's view keeps the colour sequences only; CR, U+202E and U+200B stay neutralized.
      const ansi = await t.admin('GET', `/api/v1/runs/${h.offer.run.runId}/logs?view=ansi`);
      expect((ansi.body as { items: { text: string }[] }).items[0]!.text).toBe(
        'red \u001b[31mX\u001b[0m\\u000dfake\\u202egnp.exe a\\u200bb\n',
      );
      const bad = await t.admin('GET', `/api/v1/runs/${h.offer.run.runId}/logs?view=html`);
      expect({ status: bad.status, code: (bad.body as { code: string }).code }).toEqual({
        status: 400,
        code: 'invalid_request',
      });
    });

    /** ADR 0044: the run log as the admin view shows it, `[seq, stream, text]` in position order. */
    const logView = async (runId: string) =>
      (
        (await t.admin('GET', `/api/v1/runs/${runId}/logs`)).body as {
          items: { seq: number; stream: string; text: string }[];
        }
      ).items.map((i) => [i.seq, i.stream, i.text]);

    it('completion: its finalLogs are stored with it, after the logs chunks, and the run log reads them in order with their streams', async () => {
      const { h, version } = await runningRun();
      expect(
        (await send('logs', { ...fenceOf(h, version), seq: 0, stream: 'stdout', text: 'one\n' })).status,
      ).toBe(200);
      const finalLogs = [
        { seq: 1, stream: 'stderr', text: 'two \u001b[31mred\u001b[0m\n' },
        { seq: 2, stream: 'stdout', text: 'three\n' },
      ];
      const completion = { ...fenceOf(h, version), outcome: 'succeeded', exitCode: 0, finalLogs };
      const done = activation(await send('completion', completion));
      expect(done).toMatchObject({
        status: 'applied',
        snapshot: { runStatus: 'succeeded', callbackSequence: 3 },
      });
      expect(await logView(h.offer.run.runId)).toEqual([
        [0, 'stdout', 'one\n'],
        [1, 'stderr', 'two \\u001b[31mred\\u001b[0m\n'],
        [2, 'stdout', 'three\n'],
      ]);
      // The replay of a completion whose answer was lost: the same answer, nothing written.
      const unchanged = await snapshot();
      expect(activation(await send('completion', completion))).toEqual({
        ...done,
        status: 'already_terminal',
      });
      // The same completion with other chunks is another completion.
      fenced(
        await send('completion', {
          ...completion,
          finalLogs: [finalLogs[0], { ...finalLogs[1], text: 'x' }],
        }),
        'acknowledgement_mismatch',
      );
      expect(await snapshot()).toEqual(unchanged);
    });

    it('completion with executorHandle while starting (ADR 0047): running and the completion applied together; the run shows running then finished', async () => {
      const h = await holdNewRun();
      const version = activation(await send('starting', fenceOf(h))).snapshot.leaseVersion;
      const finalLogs = [{ seq: 0, stream: 'stdout', text: 'hello\n' }];
      const completion = { ...fenceOf(h, version), outcome: 'succeeded', exitCode: 0, finalLogs };
      const unchanged = await snapshot();
      // Without the handle it is refused as before; a handle the `running` route would refuse is a 400.
      fenced(await send('completion', completion), 'attempt_not_running');
      const bad = await send('completion', { ...completion, executorHandle: 'pid 1' });
      expect({ status: bad.status, body: bad.body }).toEqual({
        status: 400,
        body: { code: 'invalid_worker_request', message: 'executorHandle: invalid_format' },
      });
      expect(await snapshot()).toEqual(unchanged);
      const fast = { ...completion, executorHandle: 'local-process:4242' };
      const done = activation(await send('completion', fast));
      expect(done).toMatchObject({
        status: 'applied',
        snapshot: {
          runStatus: 'succeeded',
          attemptStatus: 'succeeded',
          callbackSequence: 3,
          executorHandle: 'local-process:4242',
        },
      });
      const detail = (await t.admin('GET', `/api/v1/runs/${h.offer.run.runId}`)).body as {
        status: string;
        attempts: { status: string; exitCode: number }[];
        events: { type: string }[];
      };
      expect(detail).toMatchObject({ status: 'succeeded', attempts: [{ status: 'succeeded', exitCode: 0 }] });
      expect(detail.events.map((e) => e.type)).toEqual(SUCCEEDED_RUN_EVENTS);
      expect(await logView(h.offer.run.runId)).toEqual([[0, 'stdout', 'hello\n']]);
      // A lost answer's replay, and the `running` it stood in for, answer already_terminal; nothing written.
      const ended = await snapshot();
      expect(activation(await send('completion', fast))).toEqual({ ...done, status: 'already_terminal' });
      const running = await send('running', { ...fenceOf(h, version), executorHandle: 'local-process:4242' });
      expect(activation(running)).toEqual({ ...done, status: 'already_terminal' });
      expect(await snapshot()).toEqual(ended);
    });

    it('completion: refused with its finalLogs (stale lease version, seq gap, wrong session version), it stores none of them and the attempt is unchanged', async () => {
      const { h, version } = await runningRun();
      const renewed = await send('renew', fenceOf(h, version));
      await send('renew', fenceOf(h, (renewed.body as { lease: { version: number } }).lease.version));
      const current = version + 2;
      const finalLogs = [{ seq: 0, stream: 'stdout', text: 'out\n' }];
      const completion = { ...fenceOf(h, current), outcome: 'succeeded', exitCode: 0, finalLogs };
      const unchanged = await snapshot();
      fenced(await send('completion', { ...completion, leaseVersion: version }), 'lease_version_mismatch');
      fenced(
        await send('completion', { ...completion, finalLogs: [{ ...finalLogs[0], seq: 1 }] }),
        'log_sequence_gap',
      );
      const session = await send('completion', { ...completion, expectedVersion: s.version + 1 });
      expect({ status: session.status, code: (session.body as { code: string }).code }).toEqual({
        status: 409,
        code: 'worker_session_fenced',
      });
      expect(await snapshot()).toEqual(unchanged);
      expect(await logView(h.offer.run.runId)).toEqual([]);
      expect((await t.admin('GET', `/api/v1/runs/${h.offer.run.runId}`)).body).toMatchObject({
        status: 'running',
        attempts: [{ status: 'running' }],
      });
      // In sequence and under the current version, the same completion is applied.
      activation(await send('completion', completion));
      expect(await logView(h.offer.run.runId)).toEqual([[0, 'stdout', 'out\n']]);
    });

    it.each<[string, unknown, string]>([
      [
        'an unknown field in a chunk',
        [{ seq: 0, stream: 'stdout', text: 'x', fd: 1 }],
        'finalLogs[0].fd: unknown_field',
      ],
      [
        'a chunk without its stream',
        [{ seq: 0, text: 'x' }],
        'finalLogs[0].stream: must_be_one_of:stdout|stderr|system',
      ],
      ['a NUL', [{ seq: 0, stream: 'stdout', text: 'a\u0000' }], 'finalLogs[0].text: control_character'],
      ['not an array', { seq: 0, stream: 'stdout', text: 'x' }, 'finalLogs: must_be_array'],
      [
        'more chunks than one logs body',
        Array.from({ length: RUN_LOG_LIMITS.finalChunks + 1 }, (_, seq) => ({
          seq,
          stream: 'stdout',
          text: 'x',
        })),
        'finalLogs: too_many_items',
      ],
      [
        "more text than one chunk's",
        [
          { seq: 0, stream: 'stdout', text: 'x'.repeat(RUN_LOG_LIMITS.chunkBytes - 1) },
          { seq: 1, stream: 'stdout', text: 'yy' },
        ],
        'finalLogs: too_long',
      ],
    ])(
      'completion: finalLogs with %s is a 400 naming it, and writes nothing',
      async (_what, finalLogs, message) => {
        const { h, version } = await runningRun();
        const unchanged = await snapshot();
        const res = await send('completion', { ...fenceOf(h, version), outcome: 'succeeded', finalLogs });
        expect({ status: res.status, body: res.body }).toEqual({
          status: 400,
          body: { code: 'invalid_worker_request', message },
        });
        expect(await snapshot()).toEqual(unchanged);
      },
    );

    it(`completion: the body may hold one logs body more (${ingressBodyLimit('completion') / 1024} KiB), not a byte past it`, async () => {
      const { h, version } = await runningRun();
      const body = (textBytes: number) => ({
        ...fenceOf(h, version),
        outcome: 'succeeded',
        finalLogs: [{ seq: 0, stream: 'stdout', text: 'x'.repeat(textBytes) }],
      });
      const size = (textBytes: number) => Buffer.byteLength(JSON.stringify(body(textBytes)));
      const limit = ingressBodyLimit('completion');
      const unchanged = await snapshot();
      // A full chunk padded to `bytes`: the text is within its rules, the pad is an unknown field.
      const padded = (bytes: number) => {
        const pad = bytes - size(RUN_LOG_LIMITS.chunkBytes) - ',"pad":""'.length;
        const raw = JSON.stringify({ ...body(RUN_LOG_LIMITS.chunkBytes), pad: 'x'.repeat(pad) });
        expect(Buffer.byteLength(raw)).toBe(bytes);
        return t.ingress(s.creds, ingressPath(s.workerId, s.sessionId, 'completion'), undefined, {
          rawBody: raw,
        });
      };
      const answer = async (bytes: number) => {
        const res = await padded(bytes);
        return { status: res.status, code: (res.body as { code: string }).code };
      };
      expect(await answer(limit)).toEqual({ status: 400, code: 'invalid_worker_request' });
      expect(await answer(limit + 1)).toEqual({ status: 413, code: 'worker_request_too_large' });
      expect(await snapshot()).toEqual(unchanged);
      expect(size(RUN_LOG_LIMITS.chunkBytes)).toBeGreaterThan(4 * 1024);
      activation(await send('completion', body(RUN_LOG_LIMITS.chunkBytes)));
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
      // The admin view says why (issue 29 item 4): the sweeper's code; no summary came from a worker.
      expect(detail.body).toMatchObject({
        status: 'timed_out',
        attempts: [{ status: 'timed_out', errorCode: 'deadline_exceeded', errorSummary: null }],
      });
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
