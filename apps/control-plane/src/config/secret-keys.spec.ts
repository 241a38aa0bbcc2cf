import { randomBytes } from 'node:crypto';
import { ConfigError } from '@ql/contracts';
import { secretCipherOf } from './secret-keys';

const key = () => randomBytes(32).toString('base64');
const of = (secretsKey: string, secretsPreviousKeys = '', secretsKeyId = 'now') =>
  secretCipherOf({ secretsKey, secretsKeyId, secretsPreviousKeys });

describe('QL_SECRETS_KEY, _KEY_ID and _PREVIOUS_KEYS (ADR 0050)', () => {
  it('no key: no cipher; a key: its id is current and previous keys open what they sealed', () => {
    expect(of('')).toBeUndefined();
    const old = key();
    const sealed = of(old, '', 'old')!.seal('s', 'value');
    const cipher = of(key(), `old:${old}`)!;
    expect(cipher.currentKeyId).toBe('now');
    expect(cipher.keyIds.sort()).toEqual(['now', 'old']);
    expect(cipher.open('s', sealed)).toBe('value');
    expect(cipher.seal('s', 'value').keyId).toBe('now');
  });

  it.each([
    ['a short key', () => of('c2hvcnQ='), /QL_SECRETS_KEY must be 32 random bytes/],
    ['a key that is not base64', () => of('%'.repeat(44)), /QL_SECRETS_KEY must be 32 random bytes/],
    ['a previous entry without an id', () => of(key(), key()), /each entry is id:base64-key/],
    ['a previous id equal to the current', () => of(key(), `now:${key()}`), /key id now is given twice/],
    ['a previous id twice', () => of(key(), `a:${key()},a:${key()}`), /key id a is given twice/],
    ['previous keys without a current one', () => of('', `a:${key()}`), /needs QL_SECRETS_KEY/],
  ])('%s is a configuration error', (_what, make, message) => {
    expect(make).toThrow(ConfigError);
    expect(make).toThrow(message);
  });
});
