import { ValidationError } from './errors';
import { joinSecretEnv, parseSecretName, parseSecretValue, secretNamesOf } from './secrets';
import { parseTaskSpec } from './tasks';

const rule = (fn: () => unknown): string => {
  try {
    fn();
  } catch (e) {
    if (e instanceof ValidationError) return `${e.field}:${e.rule}`;
    throw e;
  }
  return 'ok';
};
const task = (extra: Record<string, unknown>) =>
  parseTaskSpec({ name: 't', command: 'node x.js', runtime: 'node', ...extra });

describe('secret names, values and mappings (ADR 0050)', () => {
  it('names: letters, digits, . _ -; never & or a line break', () => {
    expect(parseSecretName('jd-cookie_1.a')).toBe('jd-cookie_1.a');
    expect(rule(() => parseSecretName('a&b'))).toBe('name:invalid_format');
    expect(rule(() => parseSecretName('-a'))).toBe('name:invalid_format');
    expect(rule(() => parseSecretName('x'.repeat(129)))).toBe('name:too_long');
  });

  it('values: up to 64 KiB of UTF-8, line breaks and & kept, no NUL, not empty', () => {
    expect(parseSecretValue('a&b\nc')).toBe('a&b\nc');
    expect(rule(() => parseSecretValue(''))).toBe('value:too_short');
    expect(rule(() => parseSecretValue('a\u0000b'))).toBe('value:control_character');
    expect(rule(() => parseSecretValue('é'.repeat(32 * 1024 + 1)))).toBe('value:too_long');
    expect(parseSecretValue('x'.repeat(64 * 1024))).toHaveLength(64 * 1024);
  });

  it('a mapping joins several secrets with the separator it is written with, as QingLong expects', () => {
    const { spec } = task({ secretEnv: { JD_COOKIE: 'c1&c2', LIST: 'a\nb', ONE: 'solo' } });
    expect(secretNamesOf(spec.secretEnv)).toEqual(['a', 'b', 'c1', 'c2', 'solo']);
    const values = new Map([
      ['a', 'A'],
      ['b', 'B'],
      ['c1', 'pt_key=1;'],
      ['c2', 'pt_key=2;'],
      ['solo', 'S'],
    ]);
    expect(joinSecretEnv(spec.secretEnv!, values)).toEqual({
      JD_COOKIE: 'pt_key=1;&pt_key=2;',
      LIST: 'A\nB',
      ONE: 'S',
    });
  });

  it('refuses mixed separators, bad names, an env name also in env; an empty mapping leaves the digest as before', () => {
    expect(rule(() => task({ secretEnv: { X: 'a&b\nc' } }))).toBe('secretEnv.X:mixed_separators');
    expect(rule(() => task({ secretEnv: { X: 'a&&b' } }))).toBe('secretEnv.X:too_short');
    expect(rule(() => task({ secretEnv: { 'bad-key': 'a' } }))).toBe('secretEnv.<key>:invalid_format');
    expect(rule(() => task({ env: { X: '1' }, secretEnv: { X: 'a' } }))).toBe('secretEnv.X:also_in_env');
    expect(rule(() => task({ secretEnv: { X: 'a', unknown: 1 } }))).toBe('secretEnv.unknown:must_be_string');
    expect(task({ secretEnv: {} }).digest).toBe(task({}).digest);
    expect(task({ secretEnv: null }).digest).toBe(task({}).digest);
    expect(task({ secretEnv: { X: 'a' } }).digest).not.toBe(task({ secretEnv: { X: 'b' } }).digest);
  });
});
