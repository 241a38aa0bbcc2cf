import { Inject, Injectable, Logger } from '@nestjs/common';
import {
  API_KEY_REPOSITORY,
  ApiKeyRepository,
  CONSOLE_SESSION_REPOSITORY,
  ConsoleSessionRecord,
  ConsoleSessionRepository,
  ID_GENERATOR,
  IdGenerator,
  NotFoundError,
  readObject,
} from '@ql/domain';
import { readLimit } from '../admin/query-params';
import { CONFIG } from '../core/core';
import type { ControlPlaneConfig } from '../config/config';
import { AdminRefusal } from '../http/admin-errors';
import type { AdminRequest } from '../identity/api-key.guard';
import { findActiveApiKey } from '../identity/api-keys';
import {
  consoleSessionDigest,
  csrfTokenOf,
  newConsoleSessionToken,
} from '../identity/console-session-tokens';
import { parseResourceId } from '../runs/resource-ids';

/**
 * Console sessions (ADR 0052): an API key is exchanged once for a session whose token lives only in
 * an HttpOnly cookie; the key never stays in the browser. Sessions end by idleness, lifetime,
 * sign-out, an admin's revocation, or their key's revocation.
 */
@Injectable()
export class ConsoleSessionsService {
  private readonly logger = new Logger('console');

  constructor(
    @Inject(API_KEY_REPOSITORY) private readonly keys: ApiKeyRepository,
    @Inject(CONSOLE_SESSION_REPOSITORY) private readonly sessions: ConsoleSessionRepository,
    @Inject(ID_GENERATOR) private readonly ids: IdGenerator,
    @Inject(CONFIG) private readonly config: ControlPlaneConfig,
  ) {}

  /** The cookie's token and the answer; a wrong key is the guard's 401, nothing written. */
  async signIn(apiKey: string): Promise<{ token: string; view: ReturnType<typeof currentView> }> {
    const key = await findActiveApiKey(this.keys, apiKey);
    if (!key) throw new AdminRefusal(401, 'authentication_required', 'that is not an active API key');
    const token = newConsoleSessionToken();
    const id = this.ids.uuidV7();
    const session = await this.sessions.create(
      {
        id,
        digest: consoleSessionDigest(token),
        apiKeyId: key.id,
        idleMs: this.config.consoleSessionIdleMs,
        maxMs: this.config.consoleSessionMaxMs,
      },
      { actor: key.id, action: 'console_session.create', target: `console_session:${id}` },
    );
    this.logger.log({ msg: 'console signed in', sessionId: id, apiKeyId: key.id });
    return { token, view: currentView(session, key.role, key.name, token) };
  }

  current(request: AdminRequest) {
    const held = this.held(request);
    return currentView(held.session, request.apiKey!.role, request.apiKey!.name, held.token);
  }

  async signOut(request: AdminRequest): Promise<void> {
    const { session } = this.held(request);
    await this.sessions.revoke(session.id, {
      actor: request.apiKey!.id,
      action: 'console_session.sign_out',
      target: `console_session:${session.id}`,
    });
    this.logger.log({ msg: 'console signed out', sessionId: session.id });
  }

  async list(query: unknown) {
    const q = readObject(query ?? {}, 'query', ['after', 'limit']);
    const after = q.after === undefined ? null : parseResourceId(q.after, 'after');
    const limit = readLimit(q.limit);
    const items = await this.sessions.list(after, limit);
    return {
      items: items.map((s) => ({ ...listedView(s), live: s.live })),
      nextAfter: items.length === limit ? items[items.length - 1]!.id : null,
    };
  }

  async revoke(actor: { id: string }, id: string) {
    const sessionId = parseResourceId(id, 'id');
    const session = await this.sessions.revoke(sessionId, {
      actor: actor.id,
      action: 'console_session.revoke',
      target: `console_session:${sessionId}`,
    });
    this.logger.log({ msg: 'console session revoked', sessionId });
    return { ...listedView(session), live: false };
  }

  private held(request: AdminRequest) {
    if (!request.consoleSession)
      throw new NotFoundError(
        'console_session',
        'this request carries no console session (it was made with an API key)',
      );
    return request.consoleSession;
  }
}

function currentView(s: ConsoleSessionRecord, role: string, keyName: string, token: string) {
  return {
    id: s.id,
    role,
    keyName,
    csrfToken: csrfTokenOf(token),
    idleTimeoutMs: s.idleMs,
    expiresAt: new Date(s.expiresAt).toISOString(),
  };
}

function listedView(s: ConsoleSessionRecord) {
  return {
    id: s.id,
    apiKeyId: s.apiKeyId,
    createdAt: new Date(s.createdAt).toISOString(),
    lastSeenAt: new Date(s.lastSeenAt).toISOString(),
    idleTimeoutMs: s.idleMs,
    expiresAt: new Date(s.expiresAt).toISOString(),
    revokedAt: s.revokedAt === null ? null : new Date(s.revokedAt).toISOString(),
  };
}
