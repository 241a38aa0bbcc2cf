/** The admin API as the console calls it: same origin, the session cookie, the CSRF token on changes. */

export interface Session {
  readonly id: string;
  readonly role: 'viewer' | 'admin';
  readonly keyName: string;
  readonly csrfToken: string;
  readonly idleTimeoutMs: number;
  readonly expiresAt: string;
}

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

let csrfToken: string | null = null;
let onSignedOut: () => void = () => undefined;

/** The CSRF token lives in memory only; `GET /api/v1/session` gives it again after a reload. */
export function useSession(session: Session | null, signedOut: () => void): void {
  csrfToken = session?.csrfToken ?? null;
  onSignedOut = signedOut;
}

export async function api<T>(
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE',
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
  signal?: AbortSignal,
): Promise<T> {
  const res = await fetch(path, {
    method,
    credentials: 'same-origin',
    cache: 'no-store',
    signal,
    headers: {
      accept: 'application/json',
      ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
      ...(method !== 'GET' && csrfToken ? { 'x-csrf-token': csrfToken } : {}),
      ...headers,
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (res.status === 204) return undefined as T;
  const text = await res.text();
  let data: unknown;
  try {
    data = text ? JSON.parse(text) : undefined;
  } catch {
    data = undefined;
  }
  if (!res.ok) {
    const problem = (data ?? {}) as { code?: string; detail?: string };
    if (res.status === 401 && !path.endsWith('/api/v1/session')) onSignedOut();
    throw new ApiError(
      res.status,
      problem.code ?? 'error',
      problem.detail ?? `${res.status} ${res.statusText}`,
    );
  }
  return data as T;
}

export const get = <T>(path: string, signal?: AbortSignal) => api<T>('GET', path, undefined, {}, signal);

/** An idempotency key per user action, so a retried click never makes two runs. */
export function actionKey(): string {
  const bytes = new Uint8Array(12);
  crypto.getRandomValues(bytes);
  return 'console-' + Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
}
