import fc from 'fast-check';
import { ingressPath } from '@ql/contracts';
import { canonicalizeCapabilities } from '@ql/domain';
import { snapshotDatabase } from '../support/db-snapshot';
import { newSessionId } from '../support/fixtures';
import {
  TestDatabase,
  TestPlane,
  createTestDatabase,
  createTestPki,
  readPair,
  startTestPlane,
} from '../support/test-plane';

const token = fc.stringMatching(/^[a-z0-9][a-z0-9._+-]{0,15}$/);
const semver = fc
  .tuple(
    fc.nat(30),
    fc.nat(30),
    fc.nat(30),
    fc.option(fc.constantFrom('alpha.1', 'rc.2'), { nil: undefined }),
  )
  .map(([a, b, c, pre]) => `${a}.${b}.${c}${pre ? `-${pre}` : ''}`);
const labelKey = fc.stringMatching(/^[a-z0-9]([a-z0-9._/-]{0,20}[a-z0-9])?$/);
const labelValue = fc.stringMatching(/^[A-Za-z0-9 ._:-]{0,40}$/);

const capabilities = fc.record(
  {
    architecture: token,
    operatingSystem: token,
    executors: fc.uniqueArray(token, { minLength: 1, maxLength: 8 }),
    runtimes: fc.uniqueArray(fc.record({ name: token, version: semver }), {
      maxLength: 16,
      selector: (r) => `${r.name}@${r.version}`,
    }),
    labels: fc.dictionary(labelKey, labelValue, { maxKeys: 32 }),
    memoryMiB: fc.integer({ min: 0, max: 1 << 30 }),
    diskMiB: fc.integer({ min: 0, max: 1 << 30 }),
    gpus: fc.array(
      fc.record({
        vendor: token,
        model: fc.stringMatching(/^[A-Za-z0-9 -]{1,30}$/),
        memoryMiB: fc.integer({ min: 0, max: 200_000 }),
        features: fc.uniqueArray(token, { maxLength: 4 }),
      }),
      { maxLength: 8 },
    ),
    features: fc.uniqueArray(token, { maxLength: 32 }),
  },
  { requiredKeys: ['architecture', 'operatingSystem', 'executors', 'runtimes', 'memoryMiB', 'diskMiB'] },
);

const validBody = fc
  .record({
    capabilities,
    maxConcurrentRuns: fc.integer({ min: 1, max: 1024 }),
    softwareVersion: semver,
    slotsFraction: fc.double({ min: 0, max: 1, noNaN: true }),
  })
  .map(({ slotsFraction, ...b }) => ({
    ...b,
    availableSlots: Math.floor(slotsFraction * b.maxConcurrentRuns),
    protocolVersion: 3,
  }));

type Body = Record<string, unknown> & { capabilities: Record<string, unknown>; maxConcurrentRuns: number };

/** Each mutation makes a valid body certainly invalid. */
const mutations: Record<string, (b: Body) => unknown> = {
  unknownTopField: (b) => ({ ...b, sessionId: 'x' }),
  unknownCapabilityField: (b) => ({ ...b, capabilities: { ...b.capabilities, cpuCount: 4 } }),
  badSoftwareVersion: (b) => ({ ...b, softwareVersion: 'v1.2' }),
  badRuntimeSemver: (b) => ({
    ...b,
    capabilities: { ...b.capabilities, runtimes: [{ name: 'node', version: '20.x' }] },
  }),
  zeroMaxRuns: (b) => ({ ...b, maxConcurrentRuns: 0, availableSlots: 0 }),
  tooManyMaxRuns: (b) => ({ ...b, maxConcurrentRuns: 1025 }),
  slotsAboveMax: (b) => ({ ...b, availableSlots: b.maxConcurrentRuns + 1 }),
  labels33: (b) => ({
    ...b,
    capabilities: {
      ...b.capabilities,
      labels: Object.fromEntries(Array.from({ length: 33 }, (_, i) => [`l${i}`, 'v'])),
    },
  }),
  duplicateExecutor: (b) => ({
    ...b,
    capabilities: { ...b.capabilities, executors: ['local-process', 'local-process'] },
  }),
  controlCharacter: (b) => ({ ...b, capabilities: { ...b.capabilities, labels: { zone: 'a\u0000b' } } }),
  oldProtocol: (b) => ({ ...b, protocolVersion: 2 }),
  stringMemory: (b) => ({ ...b, capabilities: { ...b.capabilities, memoryMiB: '256' } }),
  missingArchitecture: (b) => ({ ...b, capabilities: { ...b.capabilities, architecture: undefined } }),
  fractionalSlots: (b) => ({ ...b, availableSlots: 0.5 }),
  arrayBody: (b) => [b],
  nullBody: () => null,
  oversized: (b) => ({ ...b, padding: 'x'.repeat(21 * 1024) }),
};

// 1,000 mTLS requests and a database read after each: ~20 s alone, over 60 s beside a second suite.
jest.setTimeout(240_000);

describe('fast-check: 1,000 generated register payloads against the running app (sqlite)', () => {
  let db: TestDatabase;
  let pki: Awaited<ReturnType<typeof createTestPki>>;
  let t: TestPlane;

  beforeAll(async () => {
    db = await createTestDatabase('sqlite');
    pki = await createTestPki(['worker-a']);
    t = await startTestPlane(db, pki, {
      QL_INGRESS_RATE_BURST: '100000',
      QL_INGRESS_RATE_PER_SECOND: '100000',
    });
  });
  afterAll(async () => {
    await t?.close();
    await db?.dispose();
    pki?.remove();
  });

  it('every invalid payload is a 4xx that writes nothing; every valid one registers', async () => {
    const creds = readPair(pki.workers['worker-a']!);
    const counts = { valid: 0, invalid: 0 };
    await fc.assert(
      fc.asyncProperty(
        validBody,
        fc.option(fc.constantFrom(...Object.keys(mutations)), { freq: 2, nil: undefined }),
        async (body, mutation) => {
          const path = ingressPath('worker-a', newSessionId(), 'register');
          if (mutation === undefined) {
            counts.valid++;
            const res = await t.ingress(creds, path, body);
            expect(res.status).toBe(200);
            expect(res.body).toMatchObject({
              outcome: expect.stringMatching(/^(created|replaced)$/),
              maxConcurrentRuns: body.maxConcurrentRuns,
            });
            const worker = await t.admin('GET', '/api/v1/workers/worker-a');
            expect((worker.body as { capabilitiesDigest: string }).capabilitiesDigest).toBe(
              canonicalizeCapabilities(body.capabilities).digest,
            );
            return;
          }
          counts.invalid++;
          const before = await snapshotDatabase(t.plane.core.db);
          const res = await t.ingress(creds, path, undefined, {
            rawBody: JSON.stringify(mutations[mutation]!(body as Body)),
          });
          expect(res.status).toBeGreaterThanOrEqual(400);
          expect(res.status).toBeLessThan(500);
          expect(await snapshotDatabase(t.plane.core.db)).toEqual(before);
        },
      ),
      { numRuns: 1000 },
    );
    expect(counts.valid + counts.invalid).toBe(1000);
    expect(counts.valid).toBeGreaterThan(100);
    expect(counts.invalid).toBeGreaterThan(100);
  });
});
