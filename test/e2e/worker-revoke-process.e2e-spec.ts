/**
 * Issue 29 item 3 (ADR 0055), with real worker processes, a real control plane and real TLS: revoking
 * a live worker's certificate makes it stop pulling, end its runs and exit 11 (`certificateRevoked`)
 * within a bounded time instead of logging 401 for ever; it puts the revoked certificate aside, so a
 * start without a token exits 11 again and a start with a new token enrolls anew and registers. A worker
 * revoked while stopped and started with a token enrolls instead of ignoring the token.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { WORKER_EXIT } from '@ql/contracts';
import {
  WorkerMachine,
  enrollingHarness,
  newEnrollmentToken,
  startOnMachine,
  workerMachine,
} from '../support/enrolled-worker';
import {
  RemoteRunHarness,
  RunWorker,
  attemptProcesses,
  eventually,
  within,
} from '../support/remote-run-harness';
import { Dialect } from '../support/test-plane';

jest.setTimeout(240_000);

/** Heartbeat every 500 ms: the worker hears of the revocation at its next call. */
const HEARTBEAT_MS = 500;
/** A bound on a hang, not a measurement: the revocation is heard within one heartbeat and one call. */
const EXIT_DEADLINE_MS = 30_000;

describe.each<Dialect>(['sqlite', 'postgres'])('a revoked worker process (%s)', (dialect) => {
  let h: RemoteRunHarness;

  beforeAll(async () => {
    h = await enrollingHarness(dialect);
  });
  afterAll(async () => {
    await h?.close();
  });

  const token = (workerId: string) => newEnrollmentToken(h.t, workerId);
  const start = (workerId: string, m: WorkerMachine, env: Record<string, string> = {}) =>
    startOnMachine(h, workerId, m, { QL_WORKER_HEARTBEAT_MS: String(HEARTBEAT_MS), ...env });
  const revoke = async (workerId: string) =>
    expect((await h.t.admin('POST', `/api/v1/workers/${workerId}/revoke`, {})).status).toBe(200);
  const failureLines = (w: RunWorker) =>
    w.lines.filter((l) => /heartbeat failed|heartbeat still failing|pull failed/.test(String(l.msg)));

  it('revoked while running a task: it ends the run, exits 11 within a bounded time, and enrolls again with a new token', async () => {
    const m = workerMachine(h, 'live');
    const w = start('rev-live', m, { QL_WORKER_ENROLL_TOKEN: await token('rev-live') });
    await h.untilOnline(w);
    const markers = h.folder('live-markers');
    mkdirSync(markers, { recursive: true });
    const started = join(markers, 'started');
    const runId = await h.trigger(
      await h.createTask({
        runtime: 'shell',
        command: `echo "$QL_ATTEMPT_ID" > ${started}; sleep 600`,
        timeoutMs: 900_000,
      }),
    );
    const attemptId = await eventually('the run started', () =>
      existsSync(started) ? readFileSync(started, 'utf8').trim() || undefined : undefined,
    );
    expect(attemptProcesses(attemptId).length).toBeGreaterThan(0);

    const revokedAt = Date.now();
    await revoke('rev-live');
    const exit = await within('the revoked worker exits', EXIT_DEADLINE_MS, w.exited);
    const tookMs = Date.now() - revokedAt;
    expect(exit.code).toBe(WORKER_EXIT.certificateRevoked);
    process.stdout.write(
      `revoked worker exited ${tookMs} ms after the revocation (bound ${EXIT_DEADLINE_MS} ms)\n`,
    );
    expect(attemptProcesses(attemptId)).toEqual([]); // its run ended with it
    expect(w.transcript()).toContain('worker certificate revoked; stopping without re-registering');
    expect(w.transcript()).toMatch(/has been revoked.*put aside as .*worker\.crt\.revoked.*new token/);
    expect(failureLines(w)).toEqual([]);
    // Not a usable certificate any more: put aside, for an operator to look at.
    expect(existsSync(m.cert)).toBe(false);
    expect(existsSync(`${m.cert}.revoked`)).toBe(true);
    expect((await h.run(runId)).status).not.toBe('succeeded');

    // Without a token a start says what it needs and exits 11 again (no supervisor restarts it).
    const again = start('rev-live', m);
    expect((await again.exited).code).toBe(WORKER_EXIT.certificateRevoked);
    expect(again.transcript()).toContain('Start the worker with a new token');

    // A new token: it enrolls anew, registers and runs a task.
    const back = start('rev-live', m, { QL_WORKER_ENROLL_TOKEN: await token('rev-live') });
    await h.untilOnline(back);
    expect(back.messages()).toContain('worker certificate enrolled');
    const rerun = await h.trigger(await h.createTask({ runtime: 'shell', command: 'echo back' }));
    expect((await h.untilRunEnds(rerun)).status).toBe('succeeded');
    back.kill('SIGTERM');
    expect((await back.exited).code).toBe(WORKER_EXIT.ok);
  });

  it('revoked while stopped: a start with a new token enrolls instead of keeping the revoked certificate', async () => {
    const m = workerMachine(h, 'stopped');
    const first = start('rev-stopped', m, { QL_WORKER_ENROLL_TOKEN: await token('rev-stopped') });
    await h.untilOnline(first);
    first.kill('SIGTERM');
    expect((await first.exited).code).toBe(WORKER_EXIT.ok);
    const held = readFileSync(m.cert, 'utf8');
    await revoke('rev-stopped');

    const tokenFile = join(h.folder('stopped-token'));
    writeFileSync(tokenFile, `${await token('rev-stopped')}\n`, { mode: 0o600 });
    const back = start('rev-stopped', m, { QL_WORKER_ENROLL_TOKEN_FILE: tokenFile });
    await h.untilOnline(back);
    expect(back.messages()).not.toContain(
      'QL_WORKER_ENROLL_TOKEN_FILE is set but the worker holds a usable certificate: not enrolling',
    );
    expect(back.lines.find((l) => l.msg === 'worker enrolling with its token')).toMatchObject({
      why: 'revoked',
    });
    expect(readFileSync(m.cert, 'utf8')).not.toBe(held);
    expect(readFileSync(`${m.cert}.revoked`, 'utf8')).toBe(held);
    back.kill('SIGTERM');
    expect((await back.exited).code).toBe(WORKER_EXIT.ok);
  });
});
