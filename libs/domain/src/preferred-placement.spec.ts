import fc from 'fast-check';
import { candidateStateArbitraries, liveCandidate } from '../../../test/support/placement-fixtures';
import { Capabilities } from './capabilities';
import {
  PlacementCandidate,
  PlacementSpec,
  candidateRejection,
  parsePlacementSpec,
  placementScore,
} from './placement';
import { PreferenceQuestion, decidePreference, preferenceLookup } from './preferred-placement';

const NOW = 1_000_000;
const HOLD = 5_000;

const caps = (labels: Record<string, string>, over: Partial<Capabilities> = {}): Capabilities => ({
  architecture: 'x86_64',
  operatingSystem: 'linux',
  executors: ['local-process'],
  runtimes: [],
  labels,
  memoryMiB: 1024,
  diskMiB: 1024,
  gpus: [],
  features: [],
  ...over,
});

const candidate = (
  workerId: string,
  labels: Record<string, string>,
  over: Partial<PlacementCandidate> = {},
): PlacementCandidate => liveCandidate(workerId, caps(labels), NOW, over);

/** Prefers zone=a (10) and rack=r1 (5); requires 512 MiB. */
const SPEC = parsePlacementSpec({
  required: { minMemoryMiB: 512 },
  preferred: [
    { key: 'zone', value: 'a', weight: 10 },
    { key: 'rack', value: 'r1', weight: 5 },
  ],
});

const question = (over: Partial<PreferenceQuestion> = {}): PreferenceQuestion => ({
  spec: SPEC,
  workerId: 'me',
  capabilities: caps({}),
  queuedAt: NOW - 1_000,
  now: NOW,
  holdMs: HOLD,
  ...over,
});

describe('preferenceLookup', () => {
  it.each<[string, Partial<PreferenceQuestion>, string[]]>([
    ['the labels the puller lacks, inside the hold', {}, ['rack=r1', 'zone=a']],
    ['only those it lacks', { capabilities: caps({ zone: 'a' }) }, ['rack=r1']],
    ['a label with another value is lacking', { capabilities: caps({ zone: 'b' }) }, ['rack=r1', 'zone=a']],
    ['none when it has them all', { capabilities: caps({ zone: 'a', rack: 'r1' }) }, []],
    ['none without preferred rules', { spec: parsePlacementSpec({}) }, []],
    ['none with hold 0', { holdMs: 0 }, []],
    ['none once the hold has passed', { queuedAt: NOW - HOLD }, []],
    ['still open one millisecond before', { queuedAt: NOW - HOLD + 1 }, ['rack=r1', 'zone=a']],
  ])('%s', (_name, over, expected) => {
    expect(preferenceLookup(question(over)).map((l) => `${l.key}=${l.value}`)).toEqual(expected);
  });
});

describe('decidePreference (R-PLC-2 in a pull)', () => {
  const best = candidate('best', { zone: 'a', rack: 'r1' });
  it.each<[string, Partial<PreferenceQuestion>, PlacementCandidate[], string | null]>([
    ['holds for a live candidate with a higher score', {}, [best], 'best'],
    ['holds for the best-ranked of several', {}, [candidate('mid', { zone: 'a' }), best], 'best'],
    ['takes when no candidate was seen', {}, [], null],
    [
      'takes from an equal score',
      { capabilities: caps({ zone: 'a' }) },
      [candidate('eq', { zone: 'a' })],
      null,
    ],
    [
      'equal score with more slots or a smaller id does not hold',
      { workerId: 'z', capabilities: caps({ zone: 'a' }) },
      [candidate('a', { zone: 'a' }, { availableSlots: 4, maxConcurrentRuns: 4 })],
      null,
    ],
    [
      'takes from a lower score',
      { capabilities: caps({ zone: 'a' }) },
      [candidate('low', { rack: 'r1' })],
      null,
    ],
    [
      'holds for a higher score with fewer labels',
      { capabilities: caps({ rack: 'r1' }) },
      [candidate('z', { zone: 'a' })],
      'z',
    ],
    ['ignores the puller itself among the candidates', { workerId: 'best' }, [best], null],
    ['takes with hold 0', { holdMs: 0 }, [best], null],
    ['takes with hold 0 when the clock stepped back', { holdMs: 0, queuedAt: NOW + 5 }, [best], null],
    ['takes once the hold has passed', { queuedAt: NOW - HOLD }, [best], null],
    ['takes without preferred rules', { spec: parsePlacementSpec({}) }, [best], null],
    ['a draining candidate holds nothing', {}, [{ ...best, status: 'draining' }], null],
    ['an offline candidate holds nothing', {}, [{ ...best, status: 'offline' }], null],
    ['a disabled candidate holds nothing', {}, [{ ...best, disabled: true }], null],
    ['an expired candidate holds nothing', {}, [{ ...best, leaseExpiresAt: NOW }], null],
    ['a full candidate holds nothing', {}, [{ ...best, activeLeases: 4 }], null],
    ['a candidate without slots holds nothing', {}, [{ ...best, availableSlots: 0 }], null],
    [
      'a candidate breaking a required rule holds nothing',
      {},
      [{ ...best, capabilities: caps({ zone: 'a', rack: 'r1' }, { memoryMiB: 256 }) }],
      null,
    ],
  ])('%s', (_name, over, candidates, heldFor) => {
    const decision = decidePreference(question(over), candidates);
    const q = question(over);
    expect(decision).toEqual(
      heldFor === null ? { kind: 'take' } : { kind: 'hold', workerId: heldFor, until: q.queuedAt + q.holdMs },
    );
  });

  describe('properties', () => {
    const LABELS = { zone: ['a', 'b'], rack: ['r1', 'r2'], ssd: ['yes'] } as const;
    const arbLabels = fc.record(
      {
        zone: fc.constantFrom(...LABELS.zone),
        rack: fc.constantFrom(...LABELS.rack),
        ssd: fc.constant('yes'),
      },
      { requiredKeys: [] },
    ) as fc.Arbitrary<Record<string, string>>;
    const arbSpec: fc.Arbitrary<PlacementSpec> = fc
      .record({
        required: fc.record({ minMemoryMiB: fc.constantFrom(0, 512) }),
        preferred: fc.subarray([
          { key: 'zone', value: 'a', weight: 10 },
          { key: 'zone', value: 'b', weight: 3 },
          { key: 'rack', value: 'r1', weight: 7 },
          { key: 'ssd', value: 'yes', weight: 1 },
        ]),
      })
      .map((s) => parsePlacementSpec(s));
    const arbCandidate: fc.Arbitrary<PlacementCandidate> = fc.record({
      workerId: fc.constantFrom('me', 'w1', 'w2', 'w3', 'w4', 'w5', 'A'),
      capabilities: fc
        .tuple(arbLabels, fc.constantFrom(256, 1024))
        .map(([labels, memoryMiB]) => caps(labels, { memoryMiB })),
      ...candidateStateArbitraries(NOW),
    });
    const arbQuestion: fc.Arbitrary<PreferenceQuestion> = fc.record({
      spec: arbSpec,
      workerId: fc.constant('me'),
      capabilities: arbLabels.map((labels) => caps(labels)),
      // A little past now too: the database clock may step back between enqueue and pull.
      queuedAt: fc.integer({ min: NOW - 2 * HOLD, max: NOW + 10 }),
      now: fc.constant(NOW),
      holdMs: fc.constantFrom(0, 1, HOLD, HOLD * 2),
    });
    const arbCase = fc.tuple(arbQuestion, fc.array(arbCandidate, { maxLength: 40 }));
    /** Candidates that could take the run now, other than the puller, with their scores. */
    const able = (q: PreferenceQuestion, cs: readonly PlacementCandidate[]) =>
      cs
        .filter((c) => c.workerId !== q.workerId && candidateRejection(q.spec, c, q.now) === null)
        .map((c) => ({ workerId: c.workerId, score: placementScore(q.spec, c.capabilities) }));

    it('with hold 0, or once the hold has passed, nothing is ever held', () => {
      fc.assert(
        fc.property(arbCase, ([q, cs]) => {
          expect(decidePreference({ ...q, holdMs: 0 }, cs)).toEqual({ kind: 'take' });
          expect(decidePreference({ ...q, queuedAt: q.now - q.holdMs }, cs)).toEqual({ kind: 'take' });
        }),
        { numRuns: 300 },
      );
    });

    it('a worker never holds a run for which it is the best candidate', () => {
      fc.assert(
        fc.property(arbCase, ([q, cs]) => {
          const mine = placementScore(q.spec, q.capabilities);
          if (able(q, cs).every((c) => c.score <= mine))
            expect(decidePreference(q, cs)).toEqual({ kind: 'take' });
        }),
        { numRuns: 500 },
      );
    });

    it('a hold names an able candidate with a strictly higher score, and ends when the hold does', () => {
      fc.assert(
        fc.property(arbCase, ([q, cs]) => {
          const decision = decidePreference(q, cs);
          const mine = placementScore(q.spec, q.capabilities);
          const better = able(q, cs).filter((c) => c.score > mine);
          const open = q.holdMs > 0 && q.now < q.queuedAt + q.holdMs;
          // Within the hold a better-scored able worker always gets the first chance, and only then.
          expect(decision.kind).toBe(open && better.length > 0 ? 'hold' : 'take');
          if (decision.kind === 'hold') {
            const top = Math.max(...better.map((c) => c.score));
            expect(better.some((c) => c.workerId === decision.workerId && c.score === top)).toBe(true);
            expect(decision.until).toBe(q.queuedAt + q.holdMs);
            expect(decision.until).toBeGreaterThan(q.now);
          }
        }),
        { numRuns: 500 },
      );
    });

    it('does not depend on the order the candidates were read in', () => {
      fc.assert(
        fc.property(
          arbQuestion,
          fc
            .array(arbCandidate, { maxLength: 40 })
            .chain((cs) => fc.tuple(fc.constant(cs), fc.shuffledSubarray(cs, { minLength: cs.length }))),
          (q, [cs, shuffled]) => {
            expect(decidePreference(q, shuffled)).toEqual(decidePreference(q, cs));
          },
        ),
        { numRuns: 300 },
      );
    });
  });
});
