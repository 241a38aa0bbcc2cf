import { createHash, randomBytes } from 'node:crypto';
import type { ApiKeyRecord, ApiKeyRepository } from '@ql/domain';

/** Admin API keys: `qlk_` + 256 random bits; only the SHA-256 digest is ever stored (R-ID-5). */
export function newApiKeyToken(): string {
  return `qlk_${randomBytes(32).toString('base64url')}`;
}

export function apiKeyDigest(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('hex');
}

export const API_KEY_PATTERN = /^qlk_[A-Za-z0-9_-]{43}$/;

/** The active key a presented token names, or null; a malformed token is refused without a lookup. */
export async function findActiveApiKey(
  keys: Pick<ApiKeyRepository, 'findActiveByDigest'>,
  token: string | undefined,
): Promise<ApiKeyRecord | null> {
  return token && API_KEY_PATTERN.test(token) ? keys.findActiveByDigest(apiKeyDigest(token)) : null;
}
