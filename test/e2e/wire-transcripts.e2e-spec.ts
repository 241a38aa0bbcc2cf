/**
 * Issue 30 items 3–4 (ADR 0060): golden transcripts of each wire version, recorded against the real
 * control plane. A v1 session (register 3) and a v2 session (register 4) make the same calls — register,
 * offers (a task with a time zone), starting, running, logs, completion, heartbeat — with the bodies each
 * version's worker sends; the answers, with ids and times replaced by placeholders, must equal
 * `libs/contracts/src/ingress/wire-transcripts.json`, which the contracts' spec replays through the
 * worker's strict readers (the v1 ones for v1). `QL_UPDATE_GOLDEN=1` writes the file instead.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ingressPath } from '@ql/contracts';
import { newSessionId, registerBody } from '../support/fixtures';
import {
  createTestDatabase,
  createTestPki,
  readPair,
  startTestPlane,
  TestDatabase,
  TestPlane,
} from '../support/test-plane';

jest.setTimeout(60_000);

const GOLDEN = join(__dirname, '..', '..', 'libs', 'contracts', 'src', 'ingress', 'wire-transcripts.json');
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const TIME = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

interface Exchange {
  readonly call: string;
  readonly status: number;
  readonly request: unknown;
  readonly answer: unknown;
}

/** Ids become `<uuid:n>` by first appearance, times `<time>`, the worker's token `<token>`. */
function placeholders(transcript: Exchange[], token: string): Exchange[] {
  const ids = new Map<string, string>();
  const walk = (v: unknown): unknown => {
    if (typeof v === 'string') {
      if (v === token) return '<token>';
      if (UUID.test(v)) {
        if (!ids.has(v)) ids.set(v, `<uuid:${ids.size + 1}>`);
        return ids.get(v);
      }
      return TIME.test(v) ? '<time>' : v;
    }
    if (Array.isArray(v)) return v.map(walk);
    if (v && typeof v === 'object')
      return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, walk(x)]));
    return v;
  };
  return transcript.map((e) => walk(e) as Exchange);
}

describe('golden wire transcripts, v1 and v2, against the real control plane (sqlite)', () => {
  let db: TestDatabase;
  let pki: Awaited<ReturnType<typeof createTestPki>>;
  let t: TestPlane;

  beforeAll(async () => {
    db = await createTestDatabase('sqlite');
    pki = await createTestPki(['router-wire-v1', 'router-wire-v2']);
    t = await startTestPlane(db, pki, {});
  });
  afterAll(async () => {
    await t?.close();
    await db?.dispose();
    pki?.remove();
  });

  /** One session's calls, with the bodies a worker of `wire` sends. */
  async function record(wire: 1 | 2): Promise<Exchange[]> {
    const workerId = `router-wire-v${wire}`;
    const creds = readPair(pki.workers[workerId]!);
    const sessionId = newSessionId();
    const transcript: Exchange[] = [];
    const call = async (action: string, request: unknown) => {
      const res = await t.ingress(creds, ingressPath(workerId, sessionId, action as 'register'), request);
      transcript.push({ call: action, status: res.status, request, answer: res.body });
      return res.body as Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
    };
    const registered = await call('register', registerBody({ protocolVersion: wire === 1 ? 3 : 4 }));
    const fence = { generation: registered.generation, expectedVersion: registered.version };
    const task = await t.admin('POST', '/api/v1/tasks', {
      name: `京东签到 v${wire}`,
      command: 'echo 签到',
      runtime: 'shell',
      cron: '0 7 * * *',
      timezone: 'Asia/Shanghai',
    });
    await t.admin('POST', `/api/v1/tasks/${(task.body as { id: string }).id}/runs`, {});
    const token = randomBytes(32).toString('base64url');
    const offered = await call('offers', { ...fence, offerId: newSessionId(), leaseToken: token });
    const lease = {
      ...fence,
      offerId: offered.lease.offerId,
      leaseToken: token,
      leaseGeneration: offered.lease.leaseGeneration,
    };
    const started = await call('starting', { ...lease, leaseVersion: 0 });
    const running = await call('running', {
      ...lease,
      leaseVersion: started.snapshot.leaseVersion,
      executorHandle: 'pid:4242',
    });
    const held = { ...lease, leaseVersion: running.snapshot.leaseVersion };
    await call('logs', { ...held, seq: 0, ...(wire === 2 ? { stream: 'stdout' } : {}), text: '签到\n' });
    await call('completion', { ...held, outcome: 'succeeded', exitCode: 0 });
    await call('heartbeat', { ...fence, availableSlots: 4 });
    return placeholders(transcript, token);
  }

  it('each version answers as its golden transcript; v1 carries no field added since', async () => {
    const recorded = { v1: await record(1), v2: await record(2) };
    if (process.env.QL_UPDATE_GOLDEN === '1') writeFileSync(GOLDEN, `${JSON.stringify(recorded, null, 2)}\n`);
    const golden = JSON.parse(readFileSync(GOLDEN, 'utf8')) as typeof recorded;
    expect(recorded).toEqual(golden);
    expect(recorded.v1.every((e) => e.status === 200)).toBe(true);
    expect(recorded.v2.every((e) => e.status === 200)).toBe(true);
    // The differences, said plainly: v2 has the time zone, the grace, the cancel list; v1 none of them.
    const text = (v: Exchange[]) => JSON.stringify(v.map((e) => e.answer));
    for (const field of ['"timezone"', '"deadlineGraceMs"', '"cancelAttemptIds"']) {
      expect(text(recorded.v1)).not.toContain(field);
      expect(text(recorded.v2)).toContain(field);
    }
  });
});
