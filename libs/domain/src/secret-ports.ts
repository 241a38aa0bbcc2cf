import type { LeaseFenceCommand } from './activation-ports';
import type { AuditEntry } from './ports';
import type { SecretPutMode, SecretRecord, SecretRotation } from './secrets';

/** What a lease holder gets for its attempt: the env names its revision maps, with their values. */
export interface SecretDelivery {
  readonly attemptId: string;
  readonly env: Record<string, string>;
}

export interface SecretRepository {
  /** Creates or replaces (as `mode` allows); the audit entry (no value) commits with it. */
  put(
    name: string,
    value: string,
    audit: AuditEntry,
    mode?: SecretPutMode,
  ): Promise<{ record: SecretRecord; created: boolean }>;
  /** Refused (conflict `secret_in_use`) while a live task's current revision maps it. */
  delete(name: string, audit: AuditEntry): Promise<SecretRecord>;
  list(query: { after?: string; limit: number }): Promise<SecretRecord[]>;
  find(name: string): Promise<SecretRecord | null>;
  /** Re-encrypts every value not under the current key. */
  rotate(audit: AuditEntry): Promise<SecretRotation>;
  /**
   * The worker's fetch (ADR 0050): the session and lease fences of every lease call (FencedError),
   * the attempt `starting` or `running`; then the values its revision maps, one audit row naming them.
   */
  deliver(command: LeaseFenceCommand): Promise<SecretDelivery>;
}

export const SECRET_REPOSITORY = Symbol('SecretRepository');

/** What a running control plane says of itself and of the secret keys it holds (ids and checks only). */
export interface PlaneSecretKeys {
  readonly replicaId: string;
  /** `host pid`, for messages. */
  readonly process: string;
  /** Key id → check value (`SecretCipher.keyChecks`); empty: no `QL_SECRETS_KEY`. */
  readonly keys: Readonly<Record<string, string>>;
  /** How often it refreshes its row; 0: only at its start (its sweeper is off). */
  readonly refreshMs: number;
}

/**
 * The `plane_secret_keys` rows (issue 29 item 5, ADR 0050): each running control plane upserts its own
 * at start and on a timer and deletes it when it stops; `npm run secret` reads the live ones, by the
 * database's clock, before it writes a value a running plane could not open.
 */
export interface PlaneSecretKeyRepository {
  publish(plane: PlaneSecretKeys): Promise<void>;
  withdraw(replicaId: string): Promise<void>;
  /** The planes that refreshed their row within three of their periods (or never refresh it). */
  live(): Promise<(PlaneSecretKeys & { readonly seenMsAgo: number })[]>;
}

export const PLANE_SECRET_KEY_REPOSITORY = Symbol('PlaneSecretKeyRepository');
