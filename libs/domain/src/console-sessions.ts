import type { ApiKeyRecord, AuditEntry } from './ports';

/** A browser's sign-in (ADR 0052): it acts with its API key's role until it ends. */
export interface ConsoleSessionRecord {
  readonly id: string;
  readonly apiKeyId: string;
  readonly createdAt: number;
  readonly lastSeenAt: number;
  /** Ends when no request came for this long. */
  readonly idleMs: number;
  /** Ends at this time whatever its use. */
  readonly expiresAt: number;
  readonly revokedAt: number | null;
}

/** Console sessions by SHA-256 digest of their token; the token itself is never stored. */
export interface ConsoleSessionRepository {
  /** A new session of an active key, with its audit row; NotFoundError('api_key') if the key is not active. */
  create(
    input: { id: string; digest: string; apiKeyId: string; idleMs: number; maxMs: number },
    audit: AuditEntry,
  ): Promise<ConsoleSessionRecord>;
  /**
   * The session with this digest and its key when, by the database clock, the session is neither
   * revoked, idle for its `idleMs`, nor past `expiresAt`, and its key is not revoked; else null. A use
   * moves `lastSeenAt` (written at most once per `touchEveryMs`, so reads stay reads).
   */
  findLive(
    digest: string,
    touchEveryMs: number,
  ): Promise<{ session: ConsoleSessionRecord; key: ApiKeyRecord } | null>;
  /** Revokes (once; a second call answers the first revocation) with its audit row; NotFoundError. */
  revoke(id: string, audit: AuditEntry): Promise<ConsoleSessionRecord>;
  /** Sessions by id after `after`, at most `limit`, with whether each is live now. */
  list(after: string | null, limit: number): Promise<(ConsoleSessionRecord & { live: boolean })[]>;
}
export const CONSOLE_SESSION_REPOSITORY = Symbol('ConsoleSessionRepository');
