// Size: the placement rules' table-driven cases and their properties (ordering, determinism) in one
// place, so a rule and its tests are reviewed together.
import fc from 'fast-check';
import {
  CURRENT_SOFTWARE,
  V1_SOFTWARE,
  candidateStateArbitraries,
  liveCandidate,
} from '../../../test/support/placement-fixtures';
import { canonicalJson } from './canonical-json';
import { Capabilities } from './capabilities';
import { ValidationError } from './errors';
import {
  CANDIDATE_PAGE,
  EMPTY_PLACEMENT,
  PLACEMENT_REASONS,
  PlacementCandidate,
  PlacementReason,
  PlacementSpec,
  candidateRejection,
  capabilityMismatch,
  explainPlacement,
  parsePlacementSpec,
  placementScore,
  rankCandidates,
  withTaskRequirements,
  withWireRequirement,
} from './placement';

const NOW = 1_000_000;

const caps: Capabilities = {
  architecture: 'x86_64',
  operatingSystem: 'linux',
  executors: ['docker', 'local-process'],
  runtimes: [
    { name: 'node', version: '20.11.0' },
    { name: 'python', version: '3.11.7' },
    { name: 'python', version: '3.12.1' },
  ],
  labels: { rack: 'r1', ssd: '', zone: 'b' },
  memoryMiB: 4096,
  diskMiB: 10240,
  gpus: [
    { vendor: 'amd', model: 'MI300', memoryMiB: 192000, features: ['rocm'] },
    { vendor: 'nvidia', model: 'T4', memoryMiB: 16000, features: ['cuda', 'fp16'] },
  ],
  features: [],
};

const spec = (input: unknown): PlacementSpec => parsePlacementSpec(input);
const required = (r: Record<string, unknown>): PlacementSpec => spec({ required: r });

const candidate = (over: Partial<PlacementCandidate> = {}): PlacementCandidate =>
  liveCandidate('w1', caps, NOW, over);

function failure(fn: () => unknown): { field: string; rule: string } | undefined {
  try {
    fn();
    return undefined;
  } catch (e) {
    if (e instanceof ValidationError) return { field: e.field, rule: e.rule };
    throw e;
  }
}

describe('parsePlacementSpec (R-PLC-1)', () => {
  const messy = {
    required: {
      architectures: ['x86_64', 'arm64'],
      executors: ['local-process'],
      runtimes: [
        { name: 'python', range: '>=3.11 <3.13' },
        { name: 'node', range: '^20' },
      ],
      labels: { zone: 'b', rack: '' },
      minMemoryMiB: 512,
      gpu: { vendor: 'nvidia', features: ['fp16', 'cuda'] },
    },
    preferred: [
      { key: 'zone', value: 'b', weight: 10 },
      { key: 'rack', value: 'r2', weight: 1 },
      { key: 'rack', value: 'r1', weight: 100 },
    ],
  };

  it('produces the golden canonical form', () => {
    const parsed = spec(messy);
    expect(parsed).toEqual({
      required: {
        architectures: ['arm64', 'x86_64'],
        operatingSystems: [],
        executors: ['local-process'],
        runtimes: [
          { name: 'node', range: '^20' },
          { name: 'python', range: '>=3.11 <3.13' },
        ],
        labels: { rack: '', zone: 'b' },
        minMemoryMiB: 512,
        minDiskMiB: 0,
        gpu: { vendor: 'nvidia', features: ['cuda', 'fp16'] },
      },
      preferred: [
        { key: 'rack', value: 'r1', weight: 100 },
        { key: 'rack', value: 'r2', weight: 1 },
        { key: 'zone', value: 'b', weight: 10 },
      ],
    });
    expect(canonicalJson(parsed)).toBe(
      '{"preferred":[{"key":"rack","value":"r1","weight":100},{"key":"rack","value":"r2","weight":1},' +
        '{"key":"zone","value":"b","weight":10}],"required":{"architectures":["arm64","x86_64"],' +
        '"executors":["local-process"],"gpu":{"features":["cuda","fp16"],"vendor":"nvidia"},' +
        '"labels":{"rack":"","zone":"b"},"minDiskMiB":0,"minMemoryMiB":512,"operatingSystems":[],' +
        '"runtimes":[{"name":"node","range":"^20"},{"name":"python","range":">=3.11 <3.13"}]}}',
    );
  });

  it('is idempotent: the canonical form parses to itself', () => {
    const parsed = spec(messy);
    expect(spec(JSON.parse(JSON.stringify(parsed)))).toEqual(parsed);
  });

  it.each<[string, unknown]>([
    ['undefined', undefined],
    ['an empty object', {}],
    ['an empty required', { required: {}, preferred: [] }],
    ['explicit null gpu', { required: { gpu: null } }],
  ])('reads %s as the empty spec', (_name, input) => {
    expect(spec(input)).toEqual(EMPTY_PLACEMENT);
  });

  it('fills defaults in the empty spec', () => {
    expect(EMPTY_PLACEMENT).toEqual({
      required: {
        architectures: [],
        operatingSystems: [],
        executors: [],
        runtimes: [],
        labels: {},
        minMemoryMiB: 0,
        minDiskMiB: 0,
        gpu: null,
      },
      preferred: [],
    });
  });

  const tokens = (n: number) => Array.from({ length: n }, (_, i) => `t${i}`);
  const runtime = (name: string, range = '*') => ({ name, range });
  const pref = (key: string, value: string, weight = 1) => ({ key, value, weight });

  it.each<[string, unknown, string, string]>([
    ['unknown top-level field', { required: {}, extra: 1 }, 'placement.extra', 'unknown_field'],
    ['unknown required field', { required: { cpu: 2 } }, 'placement.required.cpu', 'unknown_field'],
    [
      'unknown runtime field',
      { required: { runtimes: [{ name: 'node', range: '*', path: '/x' }] } },
      'placement.required.runtimes[0].path',
      'unknown_field',
    ],
    [
      'unknown gpu field',
      { required: { gpu: { vendor: 'nvidia', memoryMiB: 1 } } },
      'placement.required.gpu.memoryMiB',
      'unknown_field',
    ],
    [
      'unknown preferred field',
      { preferred: [{ key: 'zone', value: 'a', weight: 1, hard: true }] },
      'placement.preferred[0].hard',
      'unknown_field',
    ],
    ['not an object', ['x'], 'placement', 'must_be_object'],
    ['null spec', null, 'placement', 'must_be_object'],
    ['required not an object', { required: [] }, 'placement.required', 'must_be_object'],
    [
      '9 architectures',
      { required: { architectures: tokens(9) } },
      'placement.required.architectures',
      'too_many_items',
    ],
    [
      '9 operating systems',
      { required: { operatingSystems: tokens(9) } },
      'placement.required.operatingSystems',
      'too_many_items',
    ],
    ['9 executors', { required: { executors: tokens(9) } }, 'placement.required.executors', 'too_many_items'],
    [
      '17 runtimes',
      { required: { runtimes: tokens(17).map((t) => runtime(t)) } },
      'placement.required.runtimes',
      'too_many_items',
    ],
    [
      '33 labels',
      { required: { labels: Object.fromEntries(tokens(33).map((t) => [t, 'v'])) } },
      'placement.required.labels',
      'too_many_items',
    ],
    [
      '33 gpu features',
      { required: { gpu: { vendor: 'nvidia', features: tokens(33) } } },
      'placement.required.gpu.features',
      'too_many_items',
    ],
    [
      '17 preferred',
      { preferred: tokens(17).map((t) => pref('zone', t)) },
      'placement.preferred',
      'too_many_items',
    ],
    [
      'unparsable range',
      { required: { runtimes: [runtime('node', '>=x.y')] } },
      'placement.required.runtimes[0].range',
      'invalid_semver_range',
    ],
    [
      'garbage range',
      { required: { runtimes: [runtime('node', '*'), runtime('python', 'three')] } },
      'placement.required.runtimes[1].range',
      'invalid_semver_range',
    ],
    [
      'blank range (semver would read it as *)',
      { required: { runtimes: [runtime('node', ' ')] } },
      'placement.required.runtimes[0].range',
      'invalid_format',
    ],
    [
      'range with trailing space',
      { required: { runtimes: [runtime('node', '>=20 ')] } },
      'placement.required.runtimes[0].range',
      'invalid_format',
    ],
    [
      'range over 64 characters',
      { required: { runtimes: [runtime('node', `>=1.0.0 ${'<2.0.0 '.repeat(10)}`)] } },
      'placement.required.runtimes[0].range',
      'too_long',
    ],
    [
      'empty range',
      { required: { runtimes: [runtime('node', '')] } },
      'placement.required.runtimes[0].range',
      'too_short',
    ],
    [
      'duplicate architecture',
      { required: { architectures: ['arm64', 'arm64'] } },
      'placement.required.architectures',
      'duplicate_item',
    ],
    [
      'duplicate gpu feature',
      { required: { gpu: { vendor: 'nvidia', features: ['cuda', 'cuda'] } } },
      'placement.required.gpu.features',
      'duplicate_item',
    ],
    [
      'two requirements for one runtime',
      { required: { runtimes: [runtime('node', '^20'), runtime('node', '^22')] } },
      'placement.required.runtimes',
      'duplicate_item',
    ],
    [
      'duplicate preferred key and value',
      { preferred: [pref('zone', 'a', 5), pref('zone', 'b'), pref('zone', 'a', 7)] },
      'placement.preferred',
      'duplicate_item',
    ],
    ['weight 0', { preferred: [pref('zone', 'a', 0)] }, 'placement.preferred[0].weight', 'out_of_range'],
    ['weight 101', { preferred: [pref('zone', 'a', 101)] }, 'placement.preferred[0].weight', 'out_of_range'],
    [
      'fractional weight',
      { preferred: [pref('zone', 'a', 1.5)] },
      'placement.preferred[0].weight',
      'must_be_integer',
    ],
    [
      'missing weight',
      { preferred: [{ key: 'zone', value: 'a' }] },
      'placement.preferred[0].weight',
      'must_be_integer',
    ],
    [
      'upper-case token',
      { required: { executors: ['Docker'] } },
      'placement.required.executors[0]',
      'invalid_format',
    ],
    [
      'bad label key',
      { required: { labels: { 'Bad Key': 'v' } } },
      'placement.required.labels.<key>',
      'invalid_format',
    ],
    [
      'label key over 63',
      { required: { labels: { ['k'.repeat(64)]: 'v' } } },
      'placement.required.labels.<key>',
      'too_long',
    ],
    [
      'label value over 128',
      { required: { labels: { zone: 'v'.repeat(129) } } },
      `placement.required.labels.zone`,
      'too_long',
    ],
    [
      'bad preferred key',
      { preferred: [pref('-zone', 'a')] },
      'placement.preferred[0].key',
      'invalid_format',
    ],
    [
      'negative memory',
      { required: { minMemoryMiB: -1 } },
      'placement.required.minMemoryMiB',
      'out_of_range',
    ],
    [
      'disk over limit',
      { required: { minDiskMiB: 2 ** 30 + 1 } },
      'placement.required.minDiskMiB',
      'out_of_range',
    ],
    [
      'gpu without vendor',
      { required: { gpu: { features: [] } } },
      'placement.required.gpu.vendor',
      'must_be_string',
    ],
  ])('rejects %s', (_name, input, field, rule) => {
    expect(failure(() => parsePlacementSpec(input))).toEqual({ field, rule });
  });

  it('uses the field prefix it is given', () => {
    expect(failure(() => parsePlacementSpec({ x: 1 }, 'task.placement'))).toEqual({
      field: 'task.placement.x',
      rule: 'unknown_field',
    });
  });

  it.each([['^20'], ['>=1.2.3 <2'], ['1.x || >=3.0.0'], ['*'], ['>=x']])(
    'accepts the semver range %j (semver.validRange is the judge)',
    (range) => {
      expect(spec({ required: { runtimes: [{ name: 'node', range }] } }).required.runtimes).toEqual([
        { name: 'node', range },
      ]);
    },
  );

  it('accepts the limits exactly', () => {
    const parsed = spec({
      required: {
        architectures: tokens(8),
        labels: Object.fromEntries(tokens(32).map((t) => [t, 'v'.repeat(128)])),
        minMemoryMiB: 2 ** 30,
      },
      preferred: tokens(16).map((t) => pref(t, '', 100)),
    });
    expect(parsed.required.architectures).toHaveLength(8);
    expect(parsed.preferred).toHaveLength(16);
  });
});

describe('withTaskRequirements', () => {
  it.each<[string, PlacementSpec, string, 'shell' | 'node' | 'python', PlacementSpec['required']]>([
    [
      'adds executor and node runtime to the empty spec',
      EMPTY_PLACEMENT,
      'local-process',
      'node',
      { ...EMPTY_PLACEMENT.required, executors: ['local-process'], runtimes: [{ name: 'node', range: '*' }] },
    ],
    [
      'shell adds no runtime',
      EMPTY_PLACEMENT,
      'local-process',
      'shell',
      { ...EMPTY_PLACEMENT.required, executors: ['local-process'] },
    ],
    [
      'keeps an existing python range and executor, sorted',
      required({ executors: ['wasm', 'local-process'], runtimes: [{ name: 'python', range: '^3.12' }] }),
      'local-process',
      'python',
      {
        ...EMPTY_PLACEMENT.required,
        executors: ['local-process', 'wasm'],
        runtimes: [{ name: 'python', range: '^3.12' }],
      },
    ],
    [
      'inserts the runtime in sorted position',
      required({
        executors: ['wasm'],
        runtimes: [
          { name: 'deno', range: '*' },
          { name: 'ruby', range: '3' },
        ],
      }),
      'docker',
      'python',
      {
        ...EMPTY_PLACEMENT.required,
        executors: ['docker', 'wasm'],
        runtimes: [
          { name: 'deno', range: '*' },
          { name: 'python', range: '*' },
          { name: 'ruby', range: '3' },
        ],
      },
    ],
  ])('%s', (_name, input, executor, runtime, expected) => {
    const result = withTaskRequirements(input, executor, runtime);
    expect(result.required).toEqual(expected);
    expect(result.preferred).toEqual(input.preferred);
    // The result is canonical: parsing it again changes nothing.
    expect(parsePlacementSpec(JSON.parse(JSON.stringify(result)))).toEqual(result);
  });

  it('does not modify its input', () => {
    const input = required({ executors: ['wasm'] });
    withTaskRequirements(input, 'docker', 'node');
    expect(input.required.executors).toEqual(['wasm']);
    expect(input.required.runtimes).toEqual([]);
  });
});

describe('capabilityMismatch (R-PLC-2)', () => {
  it.each<[string, Record<string, unknown>, ReturnType<typeof capabilityMismatch>]>([
    ['empty spec', {}, null],
    ['architecture any-of hit', { architectures: ['arm64', 'x86_64'] }, null],
    ['architecture miss', { architectures: ['arm64'] }, 'architecture'],
    ['os any-of hit', { operatingSystems: ['darwin', 'linux'] }, null],
    ['os miss', { operatingSystems: ['windows'] }, 'os'],
    ['executors all-of hit', { executors: ['docker', 'local-process'] }, null],
    ['executors all-of miss', { executors: ['docker', 'wasm'] }, 'executor'],
    ['runtime satisfied', { runtimes: [{ name: 'node', range: '>=20 <21' }] }, null],
    ['runtime satisfied by a second version', { runtimes: [{ name: 'python', range: '^3.12' }] }, null],
    ['runtime version too old', { runtimes: [{ name: 'node', range: '>=22' }] }, 'runtime'],
    ['runtime absent', { runtimes: [{ name: 'ruby', range: '*' }] }, 'runtime'],
    ['labels all equal', { labels: { zone: 'b', ssd: '' } }, null],
    ['label wrong value', { labels: { zone: 'a' } }, 'label'],
    ['label absent', { labels: { gpu: '' } }, 'label'],
    ['label named like an Object member', { labels: { constructor: '' } }, 'label'],
    ['memory exactly enough', { minMemoryMiB: 4096 }, null],
    ['memory short', { minMemoryMiB: 4097 }, 'memory'],
    ['disk short', { minDiskMiB: 10241 }, 'disk'],
    ['gpu vendor with every feature', { gpu: { vendor: 'nvidia', features: ['fp16', 'cuda'] } }, null],
    ['gpu vendor missing', { gpu: { vendor: 'intel' } }, 'gpu'],
    // rocm is on the amd card, cuda on the nvidia card: no single GPU has both.
    ['gpu features split across cards', { gpu: { vendor: 'nvidia', features: ['cuda', 'rocm'] } }, 'gpu'],
    [
      'first failing rule wins (os before memory)',
      { operatingSystems: ['windows'], minMemoryMiB: 1 << 30 },
      'os',
    ],
    [
      'first failing rule wins (runtime before label)',
      { runtimes: [{ name: 'go', range: '*' }], labels: { x: '' } },
      'runtime',
    ],
    ['first failing rule wins (disk before gpu)', { minDiskMiB: 1 << 30, gpu: { vendor: 'intel' } }, 'disk'],
  ])('%s', (_name, req, expected) => {
    expect(capabilityMismatch(required(req), caps, CURRENT_SOFTWARE)).toBe(expected);
  });

  it('a run that needs wire v2 is kept from a v1 session, and wire comes before every other rule', () => {
    const needsV2 = withWireRequirement(required({ architectures: ['riscv64'] }), 2);
    expect(needsV2.required.wireVersion).toBe(2);
    expect(capabilityMismatch(needsV2, caps, V1_SOFTWARE)).toBe('wire_version');
    expect(capabilityMismatch(needsV2, caps, CURRENT_SOFTWARE)).toBe('architecture');
    // Wire 1 is every run's: left out of the canonical form, so runs' placements keep their text.
    expect(withWireRequirement(EMPTY_PLACEMENT, 1)).toBe(EMPTY_PLACEMENT);
    expect(canonicalJson(parsePlacementSpec({ required: { wireVersion: 1 } }))).toBe(
      canonicalJson(EMPTY_PLACEMENT),
    );
    expect(() => parsePlacementSpec({ required: { wireVersion: 3 } })).toThrow(ValidationError);
  });

  it.each([
    ['>=0.2.0', '0.1.0', 'worker_version'],
    ['>=0.2.0', '0.2.0', null],
    ['>=0.2.0', '0.3.0-rc.1', null],
    ['^0.1', '0.1.7', null],
    ['>=0.2.0', 'not-semver', 'worker_version'],
  ] as const)('workerVersion %s against a worker of %s: %s', (range, softwareVersion, expected) => {
    const spec = parsePlacementSpec({ required: { workerVersion: range } });
    expect(capabilityMismatch(spec, caps, { softwareVersion, wireVersion: 2 })).toBe(expected);
  });

  it('refuses a workerVersion that is not a semver range, or is spelled with blanks', () => {
    for (const workerVersion of ['latest', ' >=1', '', 'x'.repeat(65)])
      expect(() => parsePlacementSpec({ required: { workerVersion } })).toThrow(ValidationError);
  });

  it('a prerelease worker runtime does not satisfy a plain range', () => {
    const pre: Capabilities = { ...caps, runtimes: [{ name: 'node', version: '21.0.0-rc.1' }] };
    expect(
      capabilityMismatch(required({ runtimes: [{ name: 'node', range: '*' }] }), pre, CURRENT_SOFTWARE),
    ).toBe('runtime');
  });
});

describe('placementScore (R-PLC-3)', () => {
  it.each<[string, unknown[], number]>([
    ['no preferences', [], 0],
    [
      'sums the exact matches only',
      [
        { key: 'zone', value: 'b', weight: 10 },
        { key: 'zone', value: 'a', weight: 50 },
        { key: 'rack', value: 'r1', weight: 7 },
        { key: 'ssd', value: '', weight: 3 },
        { key: 'absent', value: '', weight: 100 },
      ],
      20,
    ],
  ])('%s', (_name, preferred, score) => {
    expect(placementScore(spec({ preferred }), caps)).toBe(score);
  });
});

describe('candidateRejection', () => {
  it.each<[string, Partial<PlacementCandidate>, Record<string, unknown>, PlacementReason | null]>([
    ['accepted', {}, {}, null],
    ['offline', { status: 'offline' }, {}, 'expired'],
    ['disabled', { disabled: true }, {}, 'expired'],
    ['lease expires now', { leaseExpiresAt: NOW }, {}, 'expired'],
    ['lease expires after now', { leaseExpiresAt: NOW + 1 }, {}, null],
    ['draining', { status: 'draining' }, {}, 'draining'],
    ['expired beats draining', { status: 'draining', leaseExpiresAt: NOW - 1 }, {}, 'expired'],
    [
      'draining beats a capability mismatch',
      { status: 'draining' },
      { architectures: ['arm64'] },
      'draining',
    ],
    ['capability mismatch', {}, { architectures: ['arm64'] }, 'architecture'],
    ['mismatch beats capacity', { activeLeases: 4 }, { minDiskMiB: 1 << 30 }, 'disk'],
    ['full at maxConcurrentRuns', { activeLeases: 4 }, {}, 'capacity'],
    ['full at availableSlots', { availableSlots: 2, activeLeases: 2 }, {}, 'capacity'],
    ['no slots', { availableSlots: 0 }, {}, 'capacity'],
    ['one slot left', { availableSlots: 2, activeLeases: 1 }, {}, null],
  ])('%s', (_name, over, req, expected) => {
    expect(candidateRejection(required(req), candidate(over), NOW)).toBe(expected);
  });
});

describe('rankCandidates', () => {
  const preferred = spec({
    required: { executors: ['docker'] },
    preferred: [
      { key: 'zone', value: 'a', weight: 10 },
      { key: 'rack', value: 'r1', weight: 5 },
    ],
  });
  const withLabels = (
    workerId: string,
    labels: Record<string, string>,
    over: Partial<PlacementCandidate> = {},
  ) => candidate({ workerId, capabilities: { ...caps, labels }, ...over });

  it('orders by score desc, then availableSlots desc, then workerId asc, dropping rejected ones', () => {
    const input = [
      withLabels('w-low', {}),
      withLabels('w-b', { zone: 'a' }, { availableSlots: 2 }),
      withLabels('w-a', { zone: 'a' }, { availableSlots: 2 }),
      withLabels('w-best', { zone: 'a', rack: 'r1' }, { availableSlots: 1 }),
      withLabels('w-roomy', { zone: 'a' }, { availableSlots: 3 }),
      withLabels('w-draining', { zone: 'a', rack: 'r1' }, { status: 'draining' }),
      withLabels(
        'w-no-docker',
        { zone: 'a', rack: 'r1' },
        { capabilities: { ...caps, executors: ['wasm'] } },
      ),
      withLabels('w-full', { zone: 'a', rack: 'r1' }, { activeLeases: 4 }),
    ];
    expect(rankCandidates(preferred, input, NOW)).toEqual([
      { workerId: 'w-best', score: 15 },
      { workerId: 'w-roomy', score: 10 },
      { workerId: 'w-a', score: 10 },
      { workerId: 'w-b', score: 10 },
      { workerId: 'w-low', score: 0 },
    ]);
  });

  it('compares worker ids by code units, not locale', () => {
    const input = ['b', 'B', 'a', 'A', '_'].map((id) => candidate({ workerId: id }));
    expect(rankCandidates(EMPTY_PLACEMENT, input, NOW).map((r) => r.workerId)).toEqual([
      'A',
      'B',
      '_',
      'a',
      'b',
    ]);
  });

  it(`returns at most CANDIDATE_PAGE (${CANDIDATE_PAGE}) candidates, the best ones`, () => {
    const input = Array.from({ length: 100 }, (_, i) =>
      candidate({ workerId: `w${String(i).padStart(3, '0')}`, availableSlots: 1 + (i % 4) }),
    );
    const ranked = rankCandidates(EMPTY_PLACEMENT, input, NOW);
    expect(ranked).toHaveLength(CANDIDATE_PAGE);
    // 25 candidates each have 4, 3, 2 and 1 slots: the page holds all 4s, 3s and the first 14 2s.
    const slots = (id: string) => input.find((c) => c.workerId === id)!.availableSlots;
    expect(ranked.slice(0, 25).every((r) => slots(r.workerId) === 4)).toBe(true);
    expect(ranked.slice(50).every((r) => slots(r.workerId) === 2)).toBe(true);
    expect(ranked[50]!.workerId).toBe('w001');
  });

  it('is invariant under input order and never returns a rejected candidate (property)', () => {
    const arbCandidate = fc.record({
      workerId: fc.constantFrom('w0', 'w1', 'w2', 'w3', 'w4', 'w5', 'w6', 'w7', 'w8', 'w9', 'A', 'b'),
      capabilities: fc.record({
        architecture: fc.constantFrom('x86_64', 'arm64'),
        operatingSystem: fc.constant('linux'),
        executors: fc.subarray(['docker', 'local-process']),
        runtimes: fc.subarray([
          { name: 'node', version: '18.19.0' },
          { name: 'node', version: '20.11.0' },
          { name: 'python', version: '3.12.1' },
        ]),
        labels: fc.record(
          { zone: fc.constantFrom('a', 'b'), rack: fc.constantFrom('r1', 'r2') },
          { requiredKeys: [] },
        ),
        memoryMiB: fc.integer({ min: 0, max: 4096 }),
        diskMiB: fc.integer({ min: 0, max: 4096 }),
        gpus: fc.constant([]),
        features: fc.constant([]),
      }),
      ...candidateStateArbitraries(NOW),
    }) as fc.Arbitrary<PlacementCandidate>;
    const arbSpec = fc
      .record({
        required: fc.record({
          architectures: fc.subarray(['x86_64', 'arm64']),
          executors: fc.subarray(['docker', 'local-process']),
          runtimes: fc.subarray([{ name: 'node', range: '>=20' }]),
          minMemoryMiB: fc.integer({ min: 0, max: 2048 }),
        }),
        preferred: fc.subarray([
          { key: 'zone', value: 'a', weight: 7 },
          { key: 'zone', value: 'b', weight: 3 },
          { key: 'rack', value: 'r1', weight: 5 },
        ]),
      })
      .map((s) => parsePlacementSpec(s));
    fc.assert(
      fc.property(
        arbSpec,
        fc
          .array(arbCandidate, { maxLength: 90 })
          .chain((cs) =>
            fc.tuple(
              fc.constant(cs),
              fc.shuffledSubarray(cs, { minLength: cs.length, maxLength: cs.length }),
            ),
          ),
        (s, [candidates, shuffled]) => {
          const ranked = rankCandidates(s, candidates, NOW);
          expect(rankCandidates(s, shuffled, NOW)).toEqual(ranked);
          expect(rankCandidates(s, [...candidates].reverse(), NOW)).toEqual(ranked);
          const accepted = candidates.filter((c) => candidateRejection(s, c, NOW) === null);
          expect(ranked).toHaveLength(Math.min(accepted.length, CANDIDATE_PAGE));
          for (const r of ranked) {
            expect(
              accepted.some(
                (c) => c.workerId === r.workerId && placementScore(s, c.capabilities) === r.score,
              ),
            ).toBe(true);
          }
          for (let i = 1; i < ranked.length; i++)
            expect(ranked[i - 1]!.score).toBeGreaterThanOrEqual(ranked[i]!.score);
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe('explainPlacement', () => {
  it('counts each rejection reason and lists every reason', () => {
    const s = withWireRequirement(
      required({ architectures: ['x86_64'], gpu: { vendor: 'nvidia' }, workerVersion: '>=0.1.0' }),
      2,
    );
    const explanation = explainPlacement(
      s,
      [
        candidate({ workerId: 'v1', software: V1_SOFTWARE }),
        candidate({ workerId: 'old', software: { softwareVersion: '0.0.5', wireVersion: 2 } }),
        candidate({ workerId: 'ok' }),
        candidate({ workerId: 'ok2', availableSlots: 1 }),
        candidate({ workerId: 'arm', capabilities: { ...caps, architecture: 'arm64' } }),
        candidate({ workerId: 'nogpu', capabilities: { ...caps, gpus: [] } }),
        candidate({ workerId: 'nogpu2', capabilities: { ...caps, gpus: [] } }),
        candidate({ workerId: 'busy', activeLeases: 4 }),
        candidate({ workerId: 'drain', status: 'draining' }),
        candidate({ workerId: 'gone', leaseExpiresAt: 0 }),
      ],
      NOW,
    );
    expect(explanation).toEqual({
      considered: 10,
      matching: 2,
      reasons: {
        architecture: 1,
        os: 0,
        executor: 0,
        runtime: 0,
        label: 0,
        memory: 0,
        disk: 0,
        gpu: 2,
        capacity: 1,
        draining: 1,
        expired: 1,
        worker_version: 1,
        wire_version: 1,
      },
      missingLabels: {},
    });
    expect(Object.keys(explanation.reasons).sort()).toEqual([...PLACEMENT_REASONS].sort());
  });

  it('names the required label keys the label-refused candidates lack, with counts', () => {
    const s = required({ labels: { zone: 'lab', disk: 'ssd' }, architectures: ['x86_64'] });
    const withLabels = (labels: Record<string, string>) => ({ ...caps, labels });
    const explanation = explainPlacement(
      s,
      [
        candidate({ workerId: 'ok', capabilities: withLabels({ zone: 'lab', disk: 'ssd' }) }),
        candidate({ workerId: 'other-zone', capabilities: withLabels({ zone: 'home', disk: 'ssd' }) }),
        candidate({ workerId: 'none', capabilities: withLabels({}) }),
        // Refused for its architecture first: its labels are not counted.
        candidate({ workerId: 'arm', capabilities: { ...withLabels({}), architecture: 'arm64' } }),
      ],
      NOW,
    );
    expect(explanation).toMatchObject({
      matching: 1,
      reasons: { label: 2, architecture: 1 },
      missingLabels: { zone: 2, disk: 1 },
    });
    expect(JSON.stringify(explanation)).not.toContain('home');
  });

  it('reports zeros for no candidates', () => {
    const explanation = explainPlacement(EMPTY_PLACEMENT, [], NOW);
    expect(explanation.considered).toBe(0);
    expect(explanation.matching).toBe(0);
    expect(Object.values(explanation.reasons)).toEqual(PLACEMENT_REASONS.map(() => 0));
  });
});
