import { ConfigError } from '@ql/contracts';
import { SECRET_KEY_ID_PATTERN, SecretCipher, parseSecretKey } from '@ql/domain';

/**
 * The cipher of the configured secret keys (ADR 0050), or undefined without `QL_SECRETS_KEY`; a
 * malformed key, or previous keys without a current one, is a configuration error. Never logged.
 */
export function secretCipherOf(c: {
  readonly secretsKey: string;
  readonly secretsKeyId: string;
  readonly secretsPreviousKeys: string;
}): SecretCipher | undefined {
  const previous = new Map<string, Buffer>();
  for (const entry of c.secretsPreviousKeys
    .split(',')
    .map((e) => e.trim())
    .filter(Boolean)) {
    const at = entry.indexOf(':');
    const id = entry.slice(0, at);
    if (at < 0 || !SECRET_KEY_ID_PATTERN.test(id))
      throw new ConfigError(
        'QL_SECRETS_PREVIOUS_KEYS: each entry is id:base64-key (the key is not repeated here)',
      );
    if (id === c.secretsKeyId || previous.has(id))
      throw new ConfigError(`QL_SECRETS_PREVIOUS_KEYS: key id ${id} is given twice`);
    previous.set(id, key(entry.slice(at + 1), `QL_SECRETS_PREVIOUS_KEYS (${id})`));
  }
  if (!c.secretsKey) {
    if (previous.size > 0)
      throw new ConfigError('QL_SECRETS_PREVIOUS_KEYS needs QL_SECRETS_KEY, the current key');
    return undefined;
  }
  return new SecretCipher(c.secretsKeyId, key(c.secretsKey, 'QL_SECRETS_KEY'), previous);
}

function key(raw: string, what: string): Buffer {
  try {
    return parseSecretKey(raw, what);
  } catch (error) {
    throw new ConfigError((error as Error).message);
  }
}
