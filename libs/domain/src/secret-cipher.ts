import {
  createCipheriv,
  createDecipheriv,
  createHmac,
  hkdfSync,
  randomBytes,
  timingSafeEqual,
} from 'node:crypto';

/** A key id: what each stored value names its key by (ADR 0050). */
export const SECRET_KEY_ID_PATTERN = /^[A-Za-z0-9._-]{1,32}$/;

/** One stored value: base64 of its 96-bit nonce, of its ciphertext with the 128-bit tag appended. */
export interface SealedSecret {
  readonly keyId: string;
  readonly nonce: string;
  readonly ciphertext: string;
}

/** A value cannot be opened: its key is not configured, or the key configured under its id is wrong. */
export class SecretKeyError extends Error {
  constructor(
    readonly keyId: string,
    readonly reason: 'key_unknown' | 'key_wrong',
    message: string,
  ) {
    super(message);
    this.name = 'SecretKeyError';
  }
}

/**
 * AES-256-GCM under the keys from configuration (ADR 0050): values are sealed with the current key;
 * previous keys only open (a rotation re-seals with the current one). The secret's name is the
 * additional data, so a ciphertext copied to another name does not open.
 */
export class SecretCipher {
  private readonly keys: ReadonlyMap<string, Buffer>;

  constructor(
    readonly currentKeyId: string,
    current: Buffer,
    previous: ReadonlyMap<string, Buffer> = new Map(),
  ) {
    const keys = new Map<string, Buffer>(previous);
    for (const [id, key] of [[currentKeyId, current] as const, ...previous]) {
      if (!SECRET_KEY_ID_PATTERN.test(id))
        throw new Error(`secret key id ${JSON.stringify(id)} is malformed`);
      if (key.length !== 32) throw new Error(`secret key ${id} is not 32 bytes`);
    }
    keys.set(currentKeyId, current);
    this.keys = keys;
  }

  /** The key configured under `keyId`, if any (for the derived MAC key). */
  keyFor(keyId: string): Buffer | undefined {
    return this.keys.get(keyId);
  }

  get keyIds(): string[] {
    return [...this.keys.keys()];
  }

  /**
   * Each key id with a check value of its key (HMAC-SHA256 of a fixed label, 16 bytes hex): two
   * processes hold the same key under an id when their checks match; the check reveals nothing of
   * the key. A running control plane publishes them for the CLI (ADR 0050, issue 29).
   */
  keyChecks(): Record<string, string> {
    return Object.fromEntries(
      [...this.keys].map(([id, key]) => [
        id,
        createHmac('sha256', key).update('ql-secret-key-check').digest('hex').slice(0, 32),
      ]),
    );
  }

  seal(name: string, value: string): SealedSecret {
    const nonce = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.keys.get(this.currentKeyId)!, nonce);
    cipher.setAAD(Buffer.from(name, 'utf8'));
    const body = Buffer.concat([cipher.update(value, 'utf8'), cipher.final(), cipher.getAuthTag()]);
    return { keyId: this.currentKeyId, nonce: nonce.toString('base64'), ciphertext: body.toString('base64') };
  }

  open(name: string, sealed: SealedSecret): string {
    const key = this.keys.get(sealed.keyId);
    if (!key)
      throw new SecretKeyError(
        sealed.keyId,
        'key_unknown',
        `secret ${name} is stored under key id ${sealed.keyId}, which is not configured (QL_SECRETS_KEY_ID or QL_SECRETS_PREVIOUS_KEYS)`,
      );
    const body = Buffer.from(sealed.ciphertext, 'base64');
    try {
      const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(sealed.nonce, 'base64'));
      decipher.setAAD(Buffer.from(name, 'utf8'));
      decipher.setAuthTag(body.subarray(body.length - 16));
      return Buffer.concat([decipher.update(body.subarray(0, body.length - 16)), decipher.final()]).toString(
        'utf8',
      );
    } catch {
      throw new SecretKeyError(
        sealed.keyId,
        'key_wrong',
        `secret ${name} does not decrypt with the key configured as ${sealed.keyId}: a wrong key under that id`,
      );
    }
  }
}

/**
 * A keyed digest of text that may hold a secret (ADR 0050: how the control plane knows a replayed log
 * chunk without keeping its raw text): HMAC-SHA256 under a key derived from the current secrets key,
 * as `<keyId>:<base64>`. `macMatches` answers null when the key it was made with is not configured.
 */
export function secretMac(cipher: SecretCipher, purpose: string, text: string): string {
  return `${cipher.currentKeyId}:${macUnder(cipher, cipher.currentKeyId, purpose, text)!}`;
}

export function macMatches(cipher: SecretCipher, purpose: string, text: string, mac: string): boolean | null {
  const at = mac.indexOf(':');
  const mine = macUnder(cipher, mac.slice(0, at), purpose, text);
  if (mine === null) return null;
  const a = Buffer.from(mine);
  const b = Buffer.from(mac.slice(at + 1));
  return a.length === b.length && timingSafeEqual(a, b);
}

function macUnder(cipher: SecretCipher, keyId: string, purpose: string, text: string): string | null {
  const key = cipher.keyFor(keyId);
  if (!key) return null;
  const macKey = Buffer.from(hkdfSync('sha256', key, Buffer.alloc(0), `ql-mac:${purpose}`, 32));
  return createHmac('sha256', macKey).update(text, 'utf8').digest('base64');
}

/** Parses one base64 key of 32 bytes; `what` names the setting in the error. */
export function parseSecretKey(raw: string, what: string): Buffer {
  const key = Buffer.from(raw.trim(), 'base64');
  if (key.length !== 32 || key.toString('base64') !== raw.trim())
    throw new Error(`${what} must be 32 random bytes in base64 (openssl rand -base64 32)`);
  return key;
}
