import { CanActivate, ExecutionContext, Inject, Injectable, SetMetadata } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import type { FastifyRequest } from 'fastify';
import { API_KEY_REPOSITORY, ApiKeyRecord, ApiKeyRepository, ApiKeyRole } from '@ql/domain';
import { AdminRefusal } from '../http/admin-errors';
import { API_KEY_PATTERN, apiKeyDigest } from './api-keys';

const ROLE = 'ql:role';
/** The least role a route needs; routes without it need `viewer`. `public` needs no key (probes). */
export const RequireRole = (role: ApiKeyRole | 'public') => SetMetadata(ROLE, role);

export type AdminRequest = FastifyRequest & { apiKey?: ApiKeyRecord };

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

@Injectable()
export class ApiKeyGuard implements CanActivate {
  constructor(
    private readonly reflector: Reflector,
    @Inject(API_KEY_REPOSITORY) private readonly keys: ApiKeyRepository,
  ) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    const needed = requiredRole(this.reflector, context.getHandler(), context.getClass());
    if (needed === 'public') return true;
    const request = context.switchToHttp().getRequest<AdminRequest>();
    const header = request.headers.authorization;
    const token = header?.startsWith('Bearer ') ? header.slice('Bearer '.length) : undefined;
    // A malformed key is refused without a database lookup.
    const key =
      token && API_KEY_PATTERN.test(token) ? await this.keys.findActiveByDigest(apiKeyDigest(token)) : null;
    if (!key)
      throw new AdminRefusal(
        401,
        'authentication_required',
        'a valid API key is required (Authorization: Bearer …)',
      );
    if (RANK[key.role] < RANK[needed])
      throw new AdminRefusal(403, 'forbidden', `this action needs the ${needed} role`);
    request.apiKey = key;
    return true;
  }
}
