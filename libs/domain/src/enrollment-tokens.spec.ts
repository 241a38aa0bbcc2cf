import fc from 'fast-check';
import {
  ENROLLMENT_WORKER_PATTERN,
  enrollmentPatternMatches,
  parseEnrollmentTokenSpec,
  parseTtl,
} from './enrollment-tokens';
import { ValidationError } from './errors';
import { isWorkerId } from './ids';

const refusal = (fn: () => unknown) => {
  try {
    fn();
  } catch (error) {
    if (error instanceof ValidationError) return error.message;
    throw error;
  }
  return 'accepted';
};

describe('enrollment token patterns (ADR 0045 §1)', () => {
  it.each([
    ['router-*', true],
    ['*-edge', true],
    ['lab-*-gpu', true],
    ['a*', true],
    ['*', false], // would enroll any id
    ['**', false],
    ['router-**', false],
    ['router-*-*', false],
    ['router', false], // no star: a worker id, not a pattern
    ['Router-*', false],
    ['-router-*', false],
    ['router_*', false],
    ['router-.*', false],
    [`${'a'.repeat(62)}*`, true],
    [`${'a'.repeat(63)}*`, false],
  ])('%s is a pattern: %s', (pattern, valid) => {
    expect(ENROLLMENT_WORKER_PATTERN.test(pattern)).toBe(valid);
  });

  it.each([
    ['router-*', 'router-1', true],
    ['router-*', 'router-', false], // the star stands for at least one character
    ['router-*', 'routers-1', false],
    ['router-*', 'xrouter-1', false],
    ['*-edge', 'a-edge', true],
    ['*-edge', '-edge', false],
    ['lab-*-gpu', 'lab-7-gpu', true],
    ['lab-*-gpu', 'lab--gpu', false],
    ['lab-*-gpu', 'lab-gpu', false], // prefix and suffix may not overlap
  ])('%s matches %s: %s', (pattern, id, match) => {
    expect(enrollmentPatternMatches(pattern, id)).toBe(match);
  });

  it('matches exactly the ids a glob with one star (one or more characters) describes', () => {
    const part = fc.stringMatching(/^[a-z0-9-]{0,6}$/);
    fc.assert(
      fc.property(part, part, fc.stringMatching(/^[a-z0-9-]{1,8}$/), fc.boolean(), (pre, suf, mid, use) => {
        const pattern = `${pre}*${suf}`;
        fc.pre(ENROLLMENT_WORKER_PATTERN.test(pattern));
        const id = use ? `${pre}${mid}${suf}` : mid;
        fc.pre(isWorkerId(id));
        const reference = new RegExp(`^${pre}.+${suf}$`).test(id); // the definition, for the test only
        expect(enrollmentPatternMatches(pattern, id)).toBe(reference);
      }),
    );
  });
});

describe('parseEnrollmentTokenSpec', () => {
  it('a worker id: one worker, 1 h by default', () => {
    expect(parseEnrollmentTokenSpec({ workerId: 'router-1' })).toEqual({
      workerId: 'router-1',
      pattern: null,
      maxWorkers: 1,
      mayReplace: false,
      ttlSeconds: 3600,
    });
  });

  it('a pattern with its count and a lifetime', () => {
    expect(parseEnrollmentTokenSpec({ pattern: 'router-*', count: 50, ttlSeconds: 600 })).toEqual({
      workerId: null,
      pattern: 'router-*',
      maxWorkers: 50,
      mayReplace: false,
      ttlSeconds: 600,
    });
  });

  it.each<[unknown, string]>([
    [{}, 'workerId: exactly_one_of_workerId_or_pattern'],
    [{ workerId: 'a', pattern: 'a-*', count: 1 }, 'workerId: exactly_one_of_workerId_or_pattern'],
    [{ workerId: 'a', count: 1 }, 'count: only_with_pattern'],
    [{ workerId: 'A' }, 'workerId: invalid_worker_id'],
    [{ pattern: 'a-*' }, 'count: required_with_pattern'],
    [{ pattern: '*', count: 1 }, 'pattern: invalid_format'],
    [{ pattern: 'a-*', count: 0 }, 'count: out_of_range (allowed 1..1000)'],
    [{ pattern: 'a-*', count: 1001 }, 'count: out_of_range (allowed 1..1000)'],
    [{ pattern: 'a-*', count: '5' }, 'count: must_be_integer'],
    [{ workerId: 'a', ttlSeconds: 59 }, 'ttlSeconds: out_of_range (allowed 60..604800)'],
    [{ workerId: 'a', ttlSeconds: 604801 }, 'ttlSeconds: out_of_range (allowed 60..604800)'],
    [{ workerId: 'a', scope: 'all' }, 'scope: unknown_field'],
  ])('%j is refused: %s', (body, message) => {
    expect(refusal(() => parseEnrollmentTokenSpec(body))).toBe(message);
  });
});

describe('parseTtl (the CLI --ttl)', () => {
  it.each([
    ['90', 90],
    ['90s', 90],
    ['30m', 1800],
    ['1h', 3600],
    ['7d', 604800],
  ])('%s is %i s', (text, seconds) => {
    expect(parseTtl(text)).toBe(seconds);
  });

  it.each(['', '1w', '1.5h', '-1h', '0h', '1 h', 'h', '01h'])('%j is not a duration', (text) => {
    expect(refusal(() => parseTtl(text))).toBe('ttl: must_be_a_duration_like_30m_1h_7d');
  });

  it.each(['59s', '8d', '169h'])('%s is outside 1 min … 7 d', (text) => {
    expect(refusal(() => parseTtl(text))).toBe('ttl: out_of_range (allowed 60..604800)');
  });
});
