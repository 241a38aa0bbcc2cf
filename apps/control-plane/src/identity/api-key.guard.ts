import { CanActivate, ExecutionContext, Inject, Injectable, SetMetadata } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import type { FastifyRequest } from 'fastify';
import {
  API_KEY_REPOSITORY,
  ApiKeyRecord,
  ApiKeyRepository,
  ApiKeyRole,
  CONSOLE_SESSION_REPOSITORY,
  ConsoleSessionRecord,
  ConsoleSessionRepository,
} from '@ql/domain';
import { AdminRefusal } from '../http/admin-errors';
import { findActiveApiKey } from './api-keys';
import {
  CSRF_HEADER,
  consoleSessionDigest,
  csrfMatches,
  sessionTokenFromCookie,
} from './console-session-tokens';

const ROLE = 'ql:role';
/** The least role a route needs; routes without it need `viewer`. `public` needs no key (probes). */
export const RequireRole = (role: ApiKeyRole | 'public') => SetMetadata(ROLE, role);

export type AdminRequest = FastifyRequest & {
  apiKey?: ApiKeyRecord;
  /** Set when the caller is a signed-in console (cookie), with the session token it presented. */
  consoleSession?: { session: ConsoleSessionRecord; token: string };
};

/** The role a handler needs: its own mark, else its controller's, else `viewer` (also read by tests). */
export function requiredRole(
  reflector: Reflector,
  handler: ReturnType<ExecutionContext['getHandler']>,
  controller: ReturnType<ExecutionContext['getClass']>,
): ApiKeyRole | 'public' {
  return (
    reflector.getAllAndOverride<ApiKeyRole | 'public' | undefined>(ROLE, [handler, controller]) ?? 'viewer'
  );
}

const RANK: Record<ApiKeyRole, number> = { viewer: 1, admin: 2 };
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);
/** A session's last use is written at most this often (ADR 0052). */
export const SESSION_TOUCH_EVERY_MS = 5_000;

/**
 * Admin callers: an API key (`Authorization: Bearer`) or a console session (the `ql_session`
 * cookie). A request with an Authorization header is judged by it alone. A session's mutations
 * also need its CSRF token in `X-CSRF-Token`, checked before the role.
 */
@Injectable()
export class ApiKeyGuard implements CanActivate {
  constructor(
    private readonly reflector: Reflector,
    @Inject(API_KEY_REPOSITORY) private readonly keys: ApiKeyRepository,
    @Inject(CONSOLE_SESSION_REPOSITORY) private readonly sessions: ConsoleSessionRepository,
  ) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    const needed = requiredRole(this.reflector, context.getHandler(), context.getClass());
    if (needed === 'public') return true;
    const request = context.switchToHttp().getRequest<AdminRequest>();
    await authorizeAdminRequest(request, needed, this.keys, this.sessions);
    return true;
  }
}

/**
 * The guard's rule, also run by the edge before a large body is read (bundle uploads, issue 27
 * item 6): the caller's key (or console session and its CSRF token), then its role; sets `apiKey`.
 */
export async function authorizeAdminRequest(
  request: AdminRequest,
  needed: ApiKeyRole,
  keys: Pick<ApiKeyRepository, 'findActiveByDigest'>,
  sessions: Pick<ConsoleSessionRepository, 'findLive'>,
): Promise<ApiKeyRecord> {
  const header = request.headers.authorization;
  const sessionToken = header === undefined ? sessionTokenFromCookie(request.headers.cookie) : undefined;
  const key = sessionToken ? await bySession(sessions, request, sessionToken) : await byApiKey(keys, header);
  if (RANK[key.role] < RANK[needed])
    throw new AdminRefusal(403, 'forbidden', `this action needs the ${needed} role`);
  request.apiKey = key;
  return key;
}

async function byApiKey(
  keys: Pick<ApiKeyRepository, 'findActiveByDigest'>,
  header: string | undefined,
): Promise<ApiKeyRecord> {
  const token = header?.startsWith('Bearer ') ? header.slice('Bearer '.length) : undefined;
  const key = await findActiveApiKey(keys, token);
  if (!key)
    throw new AdminRefusal(
      401,
      'authentication_required',
      'a valid API key is required (Authorization: Bearer …)',
    );
  return key;
}

async function bySession(
  sessions: Pick<ConsoleSessionRepository, 'findLive'>,
  request: AdminRequest,
  token: string,
): Promise<ApiKeyRecord> {
  const found = await sessions.findLive(consoleSessionDigest(token), SESSION_TOUCH_EVERY_MS);
  if (!found)
    throw new AdminRefusal(
      401,
      'authentication_required',
      'the console session ended (signed out, idle, expired or revoked): sign in again',
    );
  const presented = request.headers[CSRF_HEADER];
  if (
    !SAFE_METHODS.has(request.method) &&
    !csrfMatches(token, typeof presented === 'string' ? presented : undefined)
  )
    throw new AdminRefusal(
      403,
      'csrf_token_invalid',
      `a console session's change needs its CSRF token in ${CSRF_HEADER} (GET /api/v1/session shows it)`,
    );
  request.consoleSession = { session: found.session, token };
  return found.key;
}
