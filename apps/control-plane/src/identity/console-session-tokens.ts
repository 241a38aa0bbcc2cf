import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

/** Console session tokens (ADR 0052): `qls_` + 256 random bits, kept only in an HttpOnly cookie. */
export const CONSOLE_COOKIE = 'ql_session';
export const CSRF_HEADER = 'x-csrf-token';
export const CONSOLE_SESSION_PATTERN = /^qls_[A-Za-z0-9_-]{43}$/;

export function newConsoleSessionToken(): string {
  return `qls_${randomBytes(32).toString('base64url')}`;
}

/** What is stored of a session token: its SHA-256, hex. */
export function consoleSessionDigest(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('hex');
}

/**
 * The session's CSRF token: an HMAC of a fixed label keyed by the session token, so it is never
 * stored, and only a page that can read an answer of this origin (`GET /api/v1/session`) learns it.
 */
export function csrfTokenOf(sessionToken: string): string {
  return createHmac('sha256', sessionToken).update('ql-console-csrf').digest('base64url');
}

export function csrfMatches(sessionToken: string, presented: string | undefined): boolean {
  if (presented === undefined) return false;
  const expected = Buffer.from(csrfTokenOf(sessionToken));
  const given = Buffer.from(presented);
  return given.length === expected.length && timingSafeEqual(given, expected);
}

/** The session cookie's value from a `Cookie` header, if it is one and well formed. */
export function sessionTokenFromCookie(header: string | undefined): string | undefined {
  if (!header) return undefined;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq < 0 || part.slice(0, eq).trim() !== CONSOLE_COOKIE) continue;
    const value = part.slice(eq + 1).trim();
    return CONSOLE_SESSION_PATTERN.test(value) ? value : undefined;
  }
  return undefined;
}

/** `Set-Cookie` for a new session (no Max-Age: the browser forgets it when closed) or to clear it. */
export function sessionCookie(token: string | null, secure: boolean): string {
  const attributes = ['Path=/', 'HttpOnly', 'SameSite=Strict', ...(secure ? ['Secure'] : [])];
  return token === null
    ? [`${CONSOLE_COOKIE}=`, 'Max-Age=0', ...attributes].join('; ')
    : [`${CONSOLE_COOKIE}=${token}`, ...attributes].join('; ');
}
