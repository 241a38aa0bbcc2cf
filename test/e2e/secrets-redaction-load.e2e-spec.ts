// Issue 27 item 3 over the real mTLS ingress, both dialects: a worker that does not redact sends one
// 60 KiB chunk holding thousands of occurrences of values its run maps (512, the limit); another
// worker's heartbeat, sent while that chunk is being stored, is answered at once. The redaction
// before (an indexOf per value per match) blocked the event loop about 90 s on this chunk; the shared
// redactor's work is linear in the chunk (ADR 0050). The deadline below only bounds such a hang.
import { randomBytes } from 'node:crypto';
import { ingressPath } from '@ql/contracts';
import { leaseFence, pullOffer, registerSession, startHeldRun } from '../support/lease-holder';
import {
  Dialect,
  TestDatabase,
  TestPlane,
  createTestDatabase,
  createTestPki,
  readPair,
  startTestPlane,
} from '../support/test-plane';

const VALUES = Array.from(
  { length: 512 },
  (_v, i) => `v${i.toString(36).padStart(3, '0')}${randomBytes(3).toString('hex')}`,
);
const HANG_MS = 15_000;

describe.each<Dialect>(['sqlite', 'postgres'])('redaction under load (%s)', (dialect) => {
  let db: TestDatabase;
  let pki: Awaited<ReturnType<typeof createTestPki>>;
  let t: TestPlane;

  const register = (workerId: string) => registerSession(t, readPair(pki.workers[workerId]!), workerId);

  beforeAll(async () => {
    db = await createTestDatabase(dialect);
    pki = await createTestPki(['worker-a', 'worker-b']);
    t = await startTestPlane(db, pki, {
      QL_INGRESS_RATE_BURST: '100000',
      QL_SECRETS_KEY: randomBytes(32).toString('base64'),
    });
    for (const [i, value] of VALUES.entries())
      expect((await t.admin('POST', '/api/v1/secrets', { name: `s${i}`, value })).status).toBe(201);
  });
  afterAll(async () => {
    await t?.close();
    await db?.dispose();
    pki?.remove();
  });

  it('a 60 KiB chunk with 512 values is stored redacted while another worker’s heartbeat is answered at once', async () => {
    const a = await register('worker-a');
    const b = await register('worker-b');
    // 32 env names, each joining 16 secrets: every mapped value, 512 in all.
    const secretEnv = Object.fromEntries(
      Array.from({ length: 32 }, (_e, e) => [
        `E${e}`,
        Array.from({ length: 16 }, (_s, s) => `s${e * 16 + s}`).join('&'),
      ]),
    );
    const task = await t.admin('POST', '/api/v1/tasks', {
      name: `load ${dialect}`,
      command: 'echo hello',
      runtime: 'shell',
      secretEnv,
    });
    expect(task.status).toBe(201);
    expect((await t.admin('POST', `/api/v1/tasks/${(task.body as { id: string }).id}/runs`, {})).status).toBe(
      201,
    );
    const h = await pullOffer(t, a);
    const leaseVersion = await startHeldRun(t, a, h);
    let text = '';
    // Four of the values, over and over: each other value is searched to the chunk's end per match before.
    for (let i = 0; text.length < 60 * 1024 - 16; i++) text += `${VALUES[i % 4]} `;

    const started = Date.now();
    const logged = t.ingress(a.creds, ingressPath(a.workerId, a.sessionId, 'logs'), {
      ...leaseFence(a, h, leaseVersion),
      seq: 0,
      stream: 'stdout',
      text,
    });
    const beat = await t.ingress(b.creds, ingressPath(b.workerId, b.sessionId, 'heartbeat'), {
      generation: b.generation,
      expectedVersion: b.version,
      availableSlots: 1,
    });
    const beatMs = Date.now() - started;
    expect(beat.status).toBe(200);
    expect(beatMs).toBeLessThan(HANG_MS);
    const log = await logged;
    expect(log.status).toBe(200);
    const page = await t.admin('GET', `/api/v1/runs/${h.offer.run.runId}/logs`);
    const stored = (page.body as { items: { text: string }[] }).items.map((e) => e.text).join('');
    expect(stored).toMatch(/^(\*\*\* )+/);
    for (const value of VALUES) expect(stored).not.toContain(value);
  });
});
