import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { CAPABILITY_LIMITS, canonicalizeCapabilities } from './capabilities';
import { ValidationError } from './errors';

const base = {
  architecture: 'arm64',
  operatingSystem: 'linux',
  executors: ['local-process'],
  runtimes: [
    { name: 'python', version: '3.11.7' },
    { name: 'node', version: '20.20.2' },
  ],
  labels: { zone: 'b', rack: 'r1' },
  memoryMiB: 256,
  diskMiB: 512,
  gpus: [],
  features: ['z-feature', 'a-feature'],
};

function rejects(input: unknown, rule: string): void {
  let error: unknown;
  try {
    canonicalizeCapabilities(input);
  } catch (e) {
    error = e;
  }
  expect(error).toBeInstanceOf(ValidationError);
  expect((error as ValidationError).rule).toBe(rule);
}

describe('canonicalizeCapabilities', () => {
  it('produces the golden canonical JSON and digest', () => {
    const result = canonicalizeCapabilities(base);
    expect(result.canonical).toBe(
      '{"architecture":"arm64","diskMiB":512,"executors":["local-process"],"features":["a-feature","z-feature"],' +
        '"gpus":[],"labels":{"rack":"r1","zone":"b"},"memoryMiB":256,"operatingSystem":"linux",' +
        '"runtimes":[{"name":"node","version":"20.20.2"},{"name":"python","version":"3.11.7"}]}',
    );
    expect(result.digest).toBe(createHash('sha256').update(result.canonical).digest('hex'));
    expect(result.digest).toBe('8fbc7a6ead30de8f0f1e65d86bb337a68d705b02b5de0312dfa5fdb1fcf4f4e1');
  });

  it('fills optional sets with their empty defaults', () => {
    const { labels: _l, gpus: _g, features: _f, ...required } = base;
    const result = canonicalizeCapabilities(required);
    expect(result.capabilities.labels).toEqual({});
    expect(result.capabilities.gpus).toEqual([]);
    expect(result.capabilities.features).toEqual([]);
  });

  it.each([
    ['unknown field', { ...base, cpu: 4 }, 'unknown_field'],
    [
      'unknown runtime field',
      { ...base, runtimes: [{ name: 'node', version: '20.0.0', path: '/x' }] },
      'unknown_field',
    ],
    ['invalid semver', { ...base, runtimes: [{ name: 'node', version: '20' }] }, 'invalid_semver'],
    ['loose semver', { ...base, runtimes: [{ name: 'node', version: 'v20.1.0' }] }, 'invalid_semver'],
    ['duplicate executor', { ...base, executors: ['local-process', 'local-process'] }, 'duplicate_item'],
    ['duplicate runtime', { ...base, runtimes: [base.runtimes[0], base.runtimes[0]] }, 'duplicate_item'],
    ['control character', { ...base, labels: { zone: 'a\u0007' } }, 'control_character'],
    [
      '33 labels',
      { ...base, labels: Object.fromEntries(Array.from({ length: 33 }, (_, i) => [`k${i}`, 'v'])) },
      'too_many_items',
    ],
    ['9 executors', { ...base, executors: Array.from({ length: 9 }, (_, i) => `e${i}`) }, 'too_many_items'],
    [
      '17 runtimes',
      { ...base, runtimes: Array.from({ length: 17 }, (_, i) => ({ name: `r${i}`, version: '1.0.0' })) },
      'too_many_items',
    ],
    [
      '9 gpus',
      { ...base, gpus: Array.from({ length: 9 }, () => ({ vendor: 'nvidia', model: 'T4', memoryMiB: 1 })) },
      'too_many_items',
    ],
    ['33 features', { ...base, features: Array.from({ length: 33 }, (_, i) => `f${i}`) }, 'too_many_items'],
    ['negative memory', { ...base, memoryMiB: -1 }, 'out_of_range'],
    ['fractional disk', { ...base, diskMiB: 1.5 }, 'must_be_integer'],
    ['upper-case token', { ...base, architecture: 'X64' }, 'invalid_format'],
    ['bad label key', { ...base, labels: { 'Bad Key': 'v' } }, 'invalid_format'],
    ['missing field', { ...base, architecture: undefined }, 'must_be_string'],
    ['not an object', ['x'], 'must_be_object'],
  ])('rejects %s', (_name, input, rule) => rejects(input, rule));

  it('rejects a canonical document over 16 KiB even when every set is within its count', () => {
    const labels = Object.fromEntries(Array.from({ length: 32 }, (_, i) => [`key-${i}`, 'v'.repeat(128)]));
    const gpus = Array.from({ length: 8 }, () => ({
      vendor: 'nvidia',
      model: 'm'.repeat(128),
      memoryMiB: 1,
      features: Array.from({ length: 32 }, (_, j) => `feature-${j}-${'x'.repeat(40)}`),
    }));
    rejects({ ...base, labels, gpus }, 'too_large');
    expect(CAPABILITY_LIMITS.canonicalBytes).toBe(16384);
  });

  it('keeps two identical GPUs (a list, not a set) and orders GPUs canonically', () => {
    const t4 = { vendor: 'nvidia', model: 'T4', memoryMiB: 16000, features: ['cuda'] };
    const a100 = { vendor: 'nvidia', model: 'A100', memoryMiB: 80000, features: [] };
    const result = canonicalizeCapabilities({ ...base, gpus: [t4, a100, t4] });
    expect(result.capabilities.gpus.map((g) => g.model).sort()).toEqual(['A100', 'T4', 'T4']);
    expect(canonicalizeCapabilities({ ...base, gpus: [a100, t4, t4] }).canonical).toBe(result.canonical);
  });

  it('is invariant under key order and set order (property)', () => {
    fc.assert(
      fc.property(
        fc.shuffledSubarray(['local-process', 'docker', 'wasm'], { minLength: 1 }),
        fc.uniqueArray(fc.stringMatching(/^[a-z][a-z0-9]{0,8}$/), { maxLength: 10 }),
        fc.dictionary(
          fc.stringMatching(/^[a-z][a-z0-9]{0,8}$/),
          fc.stringMatching(/^[a-zA-Z0-9 ._-]{0,20}$/),
          { maxKeys: 10 },
        ),
        (executors, features, labels) => {
          const a = canonicalizeCapabilities({ ...base, executors, features, labels });
          const reversedLabels = Object.fromEntries(Object.entries(labels).reverse());
          const c = canonicalizeCapabilities({
            ...base,
            executors: [...executors].reverse(),
            features: [...features].reverse(),
            labels: reversedLabels,
          });
          expect(c.digest).toBe(a.digest);
          expect(c.canonical).toBe(a.canonical);
        },
      ),
      { numRuns: 200 },
    );
  });
});
