import { createHash, randomBytes } from 'node:crypto';

/** Admin API keys: `qlk_` + 256 random bits; only the SHA-256 digest is ever stored (R-ID-5). */
export function newApiKeyToken(): string {
  return `qlk_${randomBytes(32).toString('base64url')}`;
}

export function apiKeyDigest(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('hex');
}

export const API_KEY_PATTERN = /^qlk_[A-Za-z0-9_-]{43}$/;
