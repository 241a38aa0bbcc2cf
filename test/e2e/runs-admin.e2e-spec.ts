// Size: the runs admin API end to end (tasks, revisions, triggers, idempotency, list, detail, cancel,
// bad-input tables) on one running app per dialect; splitting would start more apps for no gain.
import { randomBytes } from 'node:crypto';
import { ingressPath } from '@ql/contracts';
import { PLACEMENT_REASONS, isUuidV7, parseTaskSpec } from '@ql/domain';
import { newSessionId, registerBody, validCapabilities } from '../support/fixtures';
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

/** Worker label values that must never appear in a run's explanation or events (R-PLC-3). */
const SECRET_LABELS = { zone: 'zone-f3b1c9', 'kubernetes.io/hostname': 'host-7d2e04' };
const TABLES = ['tasks', 'task_revisions', 'runs', 'attempts', 'run_events', 'audit_log'] as const;

interface TaskView {
  id: string;
  name: string;
  revision: number;
  digest: string;
  spec: Record<string, unknown>;
  changed?: boolean;
}
interface RunView {
  id: string;
  taskId: string;
  revision: number;
  specDigest: string;
  status: string;
  version: number;
  priority: number;
  cancelRequested: boolean;
}
interface RunDetail extends RunView {
  placement: { required: Record<string, unknown> };
  pending: {
    considered: number;
    matching: number;
    reasons: Record<string, number>;
    missingLabels: Record<string, number>;
  } | null;
  attempts: { id: string; attemptNo: number; status: string; workerId: string | null }[];
  events: { seq: number; type: string; attemptId: string | null }[];
}

describe.each<Dialect>(['sqlite', 'postgres'])('tasks and runs through the admin API (%s)', (dialect) => {
  let db: TestDatabase;
  let pki: Awaited<ReturnType<typeof createTestPki>>;
  let t: TestPlane;
  let names = 0;

  beforeAll(async () => {
    db = await createTestDatabase(dialect);
    pki = await createTestPki(['worker-a']);
    // A 10 min session lease: the one worker stays a live placement candidate for the whole file.
    t = await startTestPlane(db, pki, { QL_SESSION_LEASE_MS: '600000' });
    const res = await t.ingress(
      readPair(pki.workers['worker-a']!),
      ingressPath('worker-a', newSessionId(), 'register'),
      registerBody({ capabilities: validCapabilities({ labels: SECRET_LABELS }) }),
    );
    expect(res.body).toMatchObject({ generation: 1, status: 'online', availableSlots: 4 });
  });
  afterAll(async () => {
    await t?.close();
    await db?.dispose();
    pki?.remove();
  });

  /** `t.admin` with the options this file uses: extra headers (Idempotency-Key) and raw bodies. */
  const call = (
    method: string,
    path: string,
    options: { body?: unknown; raw?: string; token?: string | null; headers?: Record<string, string> } = {},
  ): Promise<HttpResult> =>
    t.admin(method, path, options.body, options.token === undefined ? t.adminToken : options.token, {
      rawBody: options.raw,
      headers: options.headers,
    });

  const taskBody = (overrides: Record<string, unknown> = {}) => ({
    name: `task ${dialect} ${++names}`,
    command: 'echo "hello"\nexit 0',
    runtime: 'shell',
    ...overrides,
  });
  const createTask = async (overrides: Record<string, unknown> = {}): Promise<TaskView> => {
    const res = await call('POST', '/api/v1/tasks', { body: taskBody(overrides) });
    expect(res.status).toBe(201);
    return res.body as TaskView;
  };
  const trigger = async (taskId: string, body: unknown = {}, key?: string) => {
    const res = await call('POST', `/api/v1/tasks/${taskId}/runs`, {
      body,
      headers: key === undefined ? {} : { 'idempotency-key': key },
    });
    return { ...res, body: res.body as { created: boolean; run: RunView } };
  };
  const runDetail = async (runId: string): Promise<RunDetail> => {
    const res = await call('GET', `/api/v1/runs/${runId}`);
    expect(res.status).toBe(200);
    return res.body as RunDetail;
  };
  const counts = async (): Promise<Record<string, number>> => {
    const result: Record<string, number> = {};
    for (const table of TABLES) {
      const row = await t.plane.core.db.one<{ n: number | string }>(`SELECT count(*) AS n FROM ${table}`);
      result[table] = Number(row!.n);
    }
    return result;
  };
  const auditTrail = async (limit = 200) =>
    (
      (await call('GET', `/api/v1/audit?limit=${limit}`)).body as {
        items: { actor: string; action: string; target: string }[];
      }
    ).items;
  const uniqueKey = () => `key-${randomBytes(8).toString('hex')}`;

  it('creates a task at revision 1 with its canonical digest; an update makes a revision only when the content changes', async () => {
    const body = taskBody({ env: { GREETING: 'hi', A_FIRST: '1' }, timeoutMs: 60_000 });
    const created = await call('POST', '/api/v1/tasks', { body });
    expect(created.status).toBe(201);
    const task = created.body as TaskView;
    const canonical = parseTaskSpec(body);
    expect(isUuidV7(task.id)).toBe(true);
    expect(task).toMatchObject({ name: body.name, revision: 1, digest: canonical.digest });
    // Canonical: every default written out, env keys sorted.
    expect(task.spec).toEqual(canonical.spec);
    expect(task.spec).toMatchObject({ executor: 'local-process', retry: null, cron: null, priority: 0 });
    expect(Object.keys(task.spec.env as object)).toEqual(['A_FIRST', 'GREETING']);

    // The same content spelled differently (key order, defaults written out) is not a change.
    const same = await call('PUT', `/api/v1/tasks/${task.id}`, {
      body: {
        priority: 0,
        env: { A_FIRST: '1', GREETING: 'hi' },
        executor: 'local-process',
        runtime: 'shell',
        timeoutMs: 60_000,
        command: body.command,
        name: body.name,
        cron: null,
      },
    });
    expect(same.status).toBe(200);
    expect(same.body).toMatchObject({ id: task.id, revision: 1, digest: task.digest, changed: false });

    const edited = await call('PUT', `/api/v1/tasks/${task.id}`, {
      body: { ...body, command: 'echo two', cron: '*/5 * * * *' },
    });
    expect(edited.status).toBe(200);
    const v2 = edited.body as TaskView;
    expect(v2).toMatchObject({ id: task.id, revision: 2, changed: true });
    expect(v2.digest).toBe(parseTaskSpec({ ...body, command: 'echo two', cron: '*/5 * * * *' }).digest);
    expect(v2.digest).not.toBe(task.digest);

    const got = await call('GET', `/api/v1/tasks/${task.id}`, { token: t.viewerToken });
    expect(got.body).toMatchObject({
      id: task.id,
      revision: 2,
      digest: v2.digest,
      spec: { command: 'echo two', cron: '*/5 * * * *' },
    });

    const revisions = await call('GET', `/api/v1/tasks/${task.id}/revisions`);
    expect(revisions.status).toBe(200);
    const items = (revisions.body as { items: TaskView[]; nextBefore: number | null }).items;
    expect(items.map((r) => [r.revision, r.digest, r.spec.command])).toEqual([
      [2, v2.digest, 'echo two'],
      [1, task.digest, body.command],
    ]);
    const page1 = await call('GET', `/api/v1/tasks/${task.id}/revisions?limit=1`);
    expect(page1.body).toMatchObject({ items: [{ revision: 2 }], nextBefore: 2 });
    const page2 = await call('GET', `/api/v1/tasks/${task.id}/revisions?limit=1&before=2`);
    // Revision 1 is the last: no cursor that leads past it, and a cursor of 1 is an empty page.
    expect(page2.body).toMatchObject({ items: [{ revision: 1 }], nextBefore: null });
    const page3 = await call('GET', `/api/v1/tasks/${task.id}/revisions?limit=1&before=1`);
    expect(page3.body).toEqual({ items: [], nextBefore: null });
    expect((await call('GET', `/api/v1/tasks/${task.id}/revisions?before=0`)).status).toBe(400);

    // A second live task with the same name is a conflict.
    const dup = await call('POST', '/api/v1/tasks', { body: { ...body } });
    expect(dup.status).toBe(409);
    expect(dup.body).toMatchObject({ code: 'conflict' });
  });

  it('lists tasks in id order with keyset pages (after / nextAfter)', async () => {
    const mine = [await createTask(), await createTask(), await createTask()].map((task) => task.id);
    const seen: string[] = [];
    let after: string | null = null;
    for (let page = 0; page < 50; page++) {
      const res = await call('GET', `/api/v1/tasks?limit=2${after ? `&after=${after}` : ''}`, {
        token: t.viewerToken,
      });
      expect(res.status).toBe(200);
      const { items, nextAfter } = res.body as { items: TaskView[]; nextAfter: string | null };
      expect(items.length).toBeLessThanOrEqual(2);
      seen.push(...items.map((task) => task.id));
      if (nextAfter === null) break;
      expect(nextAfter).toBe(items[items.length - 1]!.id);
      after = nextAfter;
    }
    expect(seen).toEqual([...new Set(seen)].sort());
    expect(seen).toEqual(expect.arrayContaining(mine));
    expect(seen.slice(-3)).toEqual(mine);
    for (const bad of ['limit=0', 'limit=201', 'after=not-an-id', 'colour=red']) {
      const res = await call('GET', `/api/v1/tasks?${bad}`);
      expect({ bad, status: res.status, code: (res.body as { code: string }).code }).toEqual({
        bad,
        status: 400,
        code: 'invalid_request',
      });
    }
    // issue 16: an out-of-range refusal names the allowed range, however far out the value is
    for (const bad of ['0', '201', '9999999999999999']) {
      const res = await call('GET', `/api/v1/tasks?limit=${bad}`);
      expect({ bad, detail: (res.body as { detail: string }).detail }).toEqual({
        bad,
        detail: 'limit: out_of_range (allowed 1..200)',
      });
    }
  });

  it('deletes a task: then get, update, delete and trigger are 404; its name is free again', async () => {
    const task = await createTask();
    const deleted = await call('DELETE', `/api/v1/tasks/${task.id}`);
    expect(deleted.status).toBe(200);
    expect(deleted.body).toMatchObject({ id: task.id, deleted: true });
    const before = await counts();
    expect((await call('GET', `/api/v1/tasks/${task.id}`)).status).toBe(404);
    const put = await call('PUT', `/api/v1/tasks/${task.id}`, { body: taskBody({ name: task.name }) });
    expect(put.status).toBe(404);
    expect(put.body).toMatchObject({ code: 'not_found' });
    expect((await call('DELETE', `/api/v1/tasks/${task.id}`)).status).toBe(404);
    const triggered = await trigger(task.id, {}, uniqueKey());
    expect(triggered.status).toBe(404);
    expect(triggered.body).toMatchObject({ code: 'not_found' });
    expect((await trigger(task.id)).status).toBe(404);
    expect(await counts()).toEqual(before);
    const list = await call('GET', '/api/v1/tasks?limit=200');
    expect((list.body as { items: TaskView[] }).items.map((x) => x.id)).not.toContain(task.id);
    expect((await call('POST', '/api/v1/tasks', { body: taskBody({ name: task.name }) })).status).toBe(201);
    // An unknown (never created) id is 404 too; a malformed one is 400.
    expect((await call('GET', `/api/v1/tasks/${newSessionId()}`)).status).toBe(404);
    expect((await call('GET', '/api/v1/tasks/abc')).status).toBe(400);
  });

  it('triggers a run with an Idempotency-Key: 201, the same key and body 200 with the same run, another body 409', async () => {
    const task = await createTask();
    const key = uniqueKey();
    const first = await trigger(task.id, {}, key);
    expect(first.status).toBe(201);
    expect(first.body).toMatchObject({
      created: true,
      run: {
        taskId: task.id,
        revision: 1,
        specDigest: task.digest,
        status: 'queued',
        trigger: 'manual',
        priority: 0,
        attemptCount: 0,
        cancelRequested: false,
      },
    });
    expect(isUuidV7(first.body.run.id)).toBe(true);

    const before = await counts();
    const replay = await trigger(task.id, {}, key);
    expect(replay.status).toBe(200);
    expect(replay.body).toEqual({ created: false, run: first.body.run });
    expect(await counts()).toEqual(before);

    const other = await trigger(task.id, { priority: 5 }, key);
    expect(other.status).toBe(409);
    expect(other.headers['content-type']).toContain('application/problem+json');
    expect(other.body).toMatchObject({ code: 'conflict', status: 409, reason: 'idempotency_key_reused' });
    const otherTask = await createTask();
    expect((await trigger(otherTask.id, {}, key)).status).toBe(409);
    expect(await counts()).toEqual({
      ...before,
      tasks: before.tasks + 1,
      task_revisions: before.task_revisions + 1,
      audit_log: before.audit_log + 1,
    });

    // Without a key every trigger is a new run; a run pins the revision current when it was made.
    const a = await trigger(task.id, { priority: 7 });
    expect(a.status).toBe(201);
    expect(a.body.run).toMatchObject({ priority: 7, revision: 1 });
    await call('PUT', `/api/v1/tasks/${task.id}`, { body: { ...task.spec, command: 'echo v2' } });
    const b = await trigger(task.id);
    expect(b.status).toBe(201);
    expect(b.body.run.id).not.toBe(a.body.run.id);
    expect(b.body.run).toMatchObject({ revision: 2 });
    expect(b.body.run.specDigest).not.toBe(task.digest);

    for (const badKey of ['has space', 'x'.repeat(129), 'a/b']) {
      const res = await trigger(task.id, {}, badKey);
      expect({ badKey, status: res.status }).toEqual({ badKey, status: 400 });
    }
  });

  it('lists runs newest first, filtered by status and task, with keyset pages (before / nextBefore)', async () => {
    const task = await createTask();
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await trigger(task.id)).body.run.id);
    expect((await call('POST', `/api/v1/runs/${ids[1]}/cancel`)).status).toBe(200);
    const newestFirst = [...ids].reverse();

    const all = await call('GET', `/api/v1/runs?taskId=${task.id}`, { token: t.viewerToken });
    expect(all.status).toBe(200);
    expect((all.body as { items: RunView[] }).items.map((r) => r.id)).toEqual(newestFirst);

    const page1 = await call('GET', `/api/v1/runs?taskId=${task.id}&limit=2`);
    const p1 = page1.body as { items: RunView[]; nextBefore: string | null };
    expect(p1.items.map((r) => r.id)).toEqual(newestFirst.slice(0, 2));
    expect(p1.nextBefore).toBe(newestFirst[1]);
    const page2 = await call('GET', `/api/v1/runs?taskId=${task.id}&limit=2&before=${p1.nextBefore}`);
    expect(page2.body).toEqual({
      items: [expect.objectContaining({ id: newestFirst[2] })],
      nextBefore: null,
    });

    const cancelled = await call('GET', `/api/v1/runs?taskId=${task.id}&status=cancelled`);
    expect((cancelled.body as { items: RunView[] }).items.map((r) => [r.id, r.status])).toEqual([
      [ids[1], 'cancelled'],
    ]);
    const queued = await call('GET', `/api/v1/runs?status=queued&taskId=${task.id}`);
    expect((queued.body as { items: RunView[] }).items.map((r) => r.id)).toEqual([ids[2], ids[0]]);

    // Without a task filter, the same keyset walks every run, newest first.
    const everything = await call('GET', '/api/v1/runs?limit=200');
    const everyId = (everything.body as { items: RunView[] }).items.map((r) => r.id);
    expect(everyId).toEqual([...everyId].sort().reverse());
    expect(everyId.slice(0, 3)).toEqual(newestFirst);

    for (const bad of ['status=done', 'taskId=abc', 'before=1', 'limit=0', 'sort=asc', 'workerId=a%20b']) {
      const res = await call('GET', `/api/v1/runs?${bad}`);
      expect({ bad, status: res.status, code: (res.body as { code: string }).code }).toEqual({
        bad,
        status: 400,
        code: 'invalid_request',
      });
    }
    for (const bad of ['a%20b', '', '-x', 'x'.repeat(200), 'a&workerId=b']) {
      const res = await call('GET', `/api/v1/runs?workerId=${bad}`);
      expect({ bad, status: res.status, detail: (res.body as { detail: string }).detail }).toEqual({
        bad,
        status: 400,
        detail: 'workerId: invalid_worker_id',
      });
    }
  });

  it('run detail explains why a run is pending: counts per reason, never a label value', async () => {
    const arm = await createTask({ placement: { required: { architectures: ['arm64'] } } });
    const run = (await trigger(arm.id)).body.run;
    const detail = await runDetail(run.id);
    expect(detail).toMatchObject({ id: run.id, status: 'queued', attempts: [] });
    // Normalised once, when the run was made: the task's executor is required too.
    expect(detail.placement.required).toMatchObject({
      architectures: ['arm64'],
      executors: ['local-process'],
    });
    expect(detail.events).toEqual([
      expect.objectContaining({ seq: 1, type: 'run.created', attemptId: null }),
    ]);
    const zero = Object.fromEntries(PLACEMENT_REASONS.map((r) => [r, 0]));
    expect(detail.pending).toEqual({
      considered: 1,
      matching: 0,
      reasons: { ...zero, architecture: 1 },
      missingLabels: {},
      computedAt: expect.stringMatching(/Z$/),
    });
    expect(detail.pending!.reasons.architecture).toBeGreaterThanOrEqual(1);

    // The same worker matches a run without that requirement: the explanation tells them apart.
    const any = await createTask();
    const anyRun = (await trigger(any.id)).body.run;
    expect((await runDetail(anyRun.id)).pending).toMatchObject({ considered: 1, matching: 1, reasons: zero });

    for (const id of [run.id, anyRun.id]) {
      const raw = (await call('GET', `/api/v1/runs/${id}`)).raw;
      for (const value of Object.values(SECRET_LABELS)) expect(raw).not.toContain(value);
    }
    // A run that is not queued has nothing pending.
    await call('POST', `/api/v1/runs/${anyRun.id}/cancel`);
    expect((await runDetail(anyRun.id)).pending).toBeNull();
  });

  it('"why pending" names the required label keys the workers lack, never their values', async () => {
    // worker-a has zone=zone-f3b1c9 (another value) and no disk label at all; it has the hostname label.
    const labelled = await createTask({
      placement: {
        required: {
          labels: {
            zone: 'lab',
            disk: 'ssd',
            'kubernetes.io/hostname': SECRET_LABELS['kubernetes.io/hostname'],
          },
        },
      },
    });
    const run = (await trigger(labelled.id)).body.run;
    const detail = await runDetail(run.id);
    expect(detail.pending).toMatchObject({ considered: 1, matching: 0, missingLabels: { zone: 1, disk: 1 } });
    expect(detail.pending!.reasons.label).toBe(1);
    const raw = (await call('GET', `/api/v1/runs/${run.id}`)).raw;
    expect(raw).not.toContain(SECRET_LABELS.zone);
    await call('POST', `/api/v1/runs/${run.id}/cancel`);
  });

  it('run detail lists attempts and the per-run event log (seq 1..n) once a worker claims the run', async () => {
    const task = await createTask();
    // Highest priority: this run is the one the pull below claims, whatever else is queued.
    const run = (await trigger(task.id, { priority: 1000 })).body.run;
    const creds = readPair(pki.workers['worker-a']!);
    const sessionId = newSessionId();
    const reg = await t.ingress(
      creds,
      ingressPath('worker-a', sessionId, 'register'),
      registerBody({ capabilities: validCapabilities({ labels: SECRET_LABELS }) }),
    );
    const { generation, version } = reg.body as { generation: number; version: number };
    const pull = await t.ingress(creds, ingressPath('worker-a', sessionId, 'offers'), {
      generation,
      expectedVersion: version,
      offerId: newSessionId(),
      leaseToken: randomBytes(32).toString('base64url'),
    });
    expect(pull.body).toMatchObject({ status: 'offered', run: { runId: run.id } });

    const claimed = await runDetail(run.id);
    expect(claimed).toMatchObject({ status: 'dispatching', attemptCount: 1, pending: null });
    // The runs list by worker (issue 20) has it; a worker it never ran on does not.
    const byWorker = async (workerId: string) =>
      ((await call('GET', `/api/v1/runs?workerId=${workerId}`)).body as { items: RunView[] }).items.map(
        (r) => r.id,
      );
    expect(await byWorker('worker-a')).toContain(run.id);
    expect(await byWorker('worker-never-seen')).toEqual([]);
    expect(claimed.attempts).toEqual([
      expect.objectContaining({ attemptNo: 1, status: 'claimed', workerId: 'worker-a', leaseGeneration: 1 }),
    ]);
    const attemptId = claimed.attempts[0]!.id;
    expect(claimed.events.map((e) => [e.seq, e.type, e.attemptId])).toEqual([
      [1, 'run.created', null],
      [2, 'run.dispatching', attemptId],
      [3, 'attempt.claimed', attemptId],
    ]);

    // Someone holds it: cancel is persisted first and delivered later (R-RUN-5); it stays dispatching.
    const cancel = await call('POST', `/api/v1/runs/${run.id}/cancel`);
    expect(cancel.status).toBe(200);
    expect(cancel.body).toMatchObject({ status: 'dispatching', cancelRequested: true });
    const after = await runDetail(run.id);
    expect(after.events.map((e) => e.seq)).toEqual([1, 2, 3, 4]);
    expect(after.events[3]).toMatchObject({ type: 'run.cancel_requested' });
  });

  it('cancel: a queued run is cancelled at once; a second cancel is 409; unknown runs are 404', async () => {
    const task = await createTask();
    const run = (await trigger(task.id)).body.run;
    const cancelled = await call('POST', `/api/v1/runs/${run.id}/cancel`);
    expect(cancelled.status).toBe(200);
    expect(cancelled.body).toMatchObject({
      id: run.id,
      status: 'cancelled',
      cancelRequested: true,
      finishedAt: expect.stringMatching(/Z$/),
    });
    const detail = await runDetail(run.id);
    expect(detail.events.map((e) => [e.seq, e.type])).toEqual([
      [1, 'run.created'],
      [2, 'run.cancel_requested'],
      [3, 'run.finished'],
    ]);
    const before = await counts();
    const again = await call('POST', `/api/v1/runs/${run.id}/cancel`);
    expect(again.status).toBe(409);
    expect(again.body).toMatchObject({ code: 'conflict', reason: 'run_finished' });
    expect(await counts()).toEqual(before);
    expect((await call('POST', `/api/v1/runs/${newSessionId()}/cancel`)).status).toBe(404);
    expect((await call('GET', `/api/v1/runs/${newSessionId()}`)).status).toBe(404);
    expect((await call('GET', '/api/v1/runs/42')).status).toBe(400);
  });

  it('a viewer reads everything but every mutation is 403 after the key lookup alone', async () => {
    const task = await createTask();
    const run = (await trigger(task.id)).body.run;
    for (const path of [
      '/api/v1/tasks',
      `/api/v1/tasks/${task.id}`,
      `/api/v1/tasks/${task.id}/revisions`,
      '/api/v1/runs',
      `/api/v1/runs/${run.id}`,
    ]) {
      const res = await call('GET', path, { token: t.viewerToken });
      expect({ path, status: res.status }).toEqual({ path, status: 200 });
    }
    const before = await counts();
    for (const [method, path, body] of [
      ['POST', '/api/v1/tasks', taskBody()],
      ['PUT', `/api/v1/tasks/${task.id}`, taskBody()],
      ['DELETE', `/api/v1/tasks/${task.id}`, undefined],
      ['POST', `/api/v1/tasks/${task.id}/runs`, {}],
      ['POST', `/api/v1/runs/${run.id}/cancel`, undefined],
    ] as const) {
      const statements = t.statements();
      const res = await call(method, path, {
        body,
        token: t.viewerToken,
        headers: { 'idempotency-key': 'v' },
      });
      expect({ method, path, status: res.status, code: (res.body as { code: string }).code }).toEqual({
        method,
        path,
        status: 403,
        code: 'forbidden',
      });
      expect(t.statements() - statements).toBe(1);
      const anonymous = await call(method, path, { body, token: null });
      expect(anonymous.status).toBe(401);
    }
    expect(await counts()).toEqual(before);
    expect((await runDetail(run.id)).status).toBe('queued');
  });

  it('every task and run mutation is in the audit log with the acting key', async () => {
    const keys = (await call('GET', '/api/v1/api-keys')).body as { items: { id: string; name: string }[] };
    const actor = keys.items.find((k) => k.name === 'test-admin')!.id;
    const task = await createTask();
    await call('PUT', `/api/v1/tasks/${task.id}`, { body: { ...task.spec, command: 'echo audited' } });
    const run = (await trigger(task.id, {}, uniqueKey())).body.run;
    await call('POST', `/api/v1/runs/${run.id}/cancel`);
    await call('DELETE', `/api/v1/tasks/${task.id}`);
    const trail = (await auditTrail(10)).slice(0, 5);
    expect(trail).toEqual(
      [
        ['task.delete', `task:${task.id}`],
        ['run.cancel', `run:${run.id}`],
        ['run.trigger', `run:${run.id}`],
        ['task.update', `task:${task.id}`],
        ['task.create', `task:${task.id}`],
      ].map(([action, target]) => expect.objectContaining({ actor, action, target })),
    );
  });

  describe('bad input is 400 invalid_request and writes nothing', () => {
    const archs = Array.from({ length: 9 }, (_, i) => `arch${i}`);
    const preferred17 = Array.from({ length: 17 }, (_, i) => ({ key: `k${i}`, value: 'v', weight: 1 }));
    const cases: [string, Record<string, unknown>][] = [
      ['an unknown placement field', { placement: { required: { colour: 'blue' } } }],
      ['an unknown top-level placement field', { placement: { required: {}, forbidden: {} } }],
      ['9 architectures', { placement: { required: { architectures: archs } } }],
      ['a duplicate architecture', { placement: { required: { architectures: ['x64', 'x64'] } } }],
      ['17 preferred labels', { placement: { preferred: preferred17 } }],
      ['a preferred weight of 0', { placement: { preferred: [{ key: 'zone', value: 'a', weight: 0 }] } }],
      ['a preferred weight of 101', { placement: { preferred: [{ key: 'zone', value: 'a', weight: 101 }] } }],
      [
        'an invalid semver range',
        { placement: { required: { runtimes: [{ name: 'node', range: '>=x.y' }] } } },
      ],
      ['a command over 32 KiB', { command: 'x'.repeat(32 * 1024 + 1) }],
      ['a command over 32 KiB in UTF-8 bytes', { command: 'é'.repeat(16 * 1024 + 1) }],
      ['an empty command', { command: '' }],
      ['a control character in the command', { command: 'echo \u0007' }],
      ['an unknown top-level field', { owner: 'me' }],
      ['a workerId in the body', { workerId: 'worker-a' }],
      ['a bad cron (minute 61)', { cron: '61 * * * *' }],
      ['a bad cron (words)', { cron: 'every minute' }],
      ['a bad runtime', { runtime: 'ruby' }],
      ['a bad executor', { executor: 'docker' }],
      ['a timeout below 1 s', { timeoutMs: 999 }],
      ['a retry policy of 1 attempt', { retry: { maxAttempts: 1, initialBackoffMs: 1000 } }],
      ['a bad env key', { env: { 'NOT-OK': 'x' } }],
      ['a priority over 1000', { priority: 1001 }],
    ];
    let existing: TaskView;
    beforeAll(async () => {
      existing = await createTask();
    });

    /** Only the API key lookup may run: the body is refused before any repository call. */
    const expectRefused = async (send: () => Promise<HttpResult>) => {
      const before = await counts();
      const statements = t.statements();
      const res = await send();
      const used = t.statements() - statements;
      expect(res.status).toBe(400);
      expect(res.headers['content-type']).toContain('application/problem+json');
      expect(res.body).toMatchObject({ code: 'invalid_request', status: 400 });
      expect(used).toBe(1);
      expect(await counts()).toEqual(before);
    };

    it.each(cases)('create with %s', async (_name, overrides) => {
      await expectRefused(() => call('POST', '/api/v1/tasks', { body: taskBody(overrides) }));
    });

    it.each(cases)('update with %s', async (_name, overrides) => {
      await expectRefused(() =>
        call('PUT', `/api/v1/tasks/${existing.id}`, {
          body: taskBody({ name: existing.name, ...overrides }),
        }),
      );
      expect((await call('GET', `/api/v1/tasks/${existing.id}`)).body).toMatchObject({ revision: 1 });
    });

    it.each<[string, unknown]>([
      ['an unknown field', { priority: 1, colour: 'red' }],
      ['a negative priority', { priority: -1 }],
      ['a priority over 1000', { priority: 1001 }],
      ['a string priority', { priority: '5' }],
      ['an array body', [1]],
    ])('trigger with %s', async (_name, body) => {
      await expectRefused(() =>
        call('POST', `/api/v1/tasks/${existing.id}/runs`, {
          body,
          headers: { 'idempotency-key': uniqueKey() },
        }),
      );
    });

    it('invalid JSON', async () => {
      const before = await counts();
      const res = await call('POST', '/api/v1/tasks', { raw: '{"name":' });
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({ code: 'invalid_request' });
      expect(await counts()).toEqual(before);
    });

    it('a body over the admin body limit is 413 before any statement', async () => {
      const before = await counts();
      const statements = t.statements();
      const res = await call('POST', '/api/v1/tasks', {
        raw: JSON.stringify(taskBody({ command: 'x'.repeat(129 * 1024) })),
      });
      expect(res.status).toBe(413);
      expect(res.headers['content-type']).toContain('application/problem+json');
      expect(res.body).toMatchObject({ code: 'request_too_large', status: 413 });
      expect(t.statements()).toBe(statements);
      expect(await counts()).toEqual(before);
    });
  });
});
