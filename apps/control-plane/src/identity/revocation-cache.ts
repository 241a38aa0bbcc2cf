import { Inject, Injectable } from '@nestjs/common';
import { CERTIFICATE_REVOCATION_REPOSITORY, CLOCK, CertificateRevocationRepository, Clock } from '@ql/domain';
import { CONFIG } from '../core/core';
import { ControlPlaneConfig } from '../config/config';

const MAX_ENTRIES = 10_000;

/** A fingerprint's state as read at `at`, with the number of revoked certificates in the same read. */
interface Verdict {
  revoked: boolean;
  count: number;
  at: number;
}

/** The number of revoked certificates, read at `at`. */
interface Census {
  readonly count: number;
  readonly at: number;
}

/**
 * Remembers a fingerprint's revocation state for QL_REVOCATION_CACHE_MS (≤ 5 s, R-ID-4), so a busy
 * worker costs one lookup per period, not one per call. No timer: entries expire on read.
 *
 * An expired "not revoked" is renewed, without its own lookup, by a count of the revoked certificates
 * no older than the window, shared by every fingerprint (ADR 0022): revocations are never withdrawn,
 * so the same count as at the fingerprint's own lookup is the same set. A changed count sends each
 * fingerprint back to its own lookup. Idle of revocations, a replica costs one statement per window
 * however many workers it serves, and no verdict is older than the window, as before.
 */
@Injectable()
export class RevocationCache {
  private readonly entries = new Map<string, Verdict>();
  private census: Census | undefined;
  private counting: Promise<Census> | undefined;

  constructor(
    @Inject(CERTIFICATE_REVOCATION_REPOSITORY) private readonly revocations: CertificateRevocationRepository,
    @Inject(CONFIG) private readonly config: ControlPlaneConfig,
    @Inject(CLOCK) private readonly clock: Clock,
  ) {}

  async isRevoked(fingerprint: string): Promise<boolean> {
    const now = this.clock.now();
    const hit = this.entries.get(fingerprint);
    if (hit && this.fresh(hit.at, now)) return hit.revoked;
    // With no window (QL_REVOCATION_CACHE_MS 0) no count could be fresh: straight to the lookup.
    if (hit && !hit.revoked && this.config.revocationCacheMs > 0) {
      const census = await this.currentCensus(now);
      if (census.count === hit.count && this.fresh(census.at, this.clock.now())) {
        hit.at = census.at;
        return false;
      }
    }
    const { revoked, revokedCount } = await this.revocations.lookUp(fingerprint);
    if (this.entries.size >= MAX_ENTRIES) this.entries.clear();
    this.entries.set(fingerprint, { revoked, count: revokedCount, at: now });
    return revoked;
  }

  /** A clock stepped back must not stretch the window: a read from the "future" is stale. */
  private fresh(at: number, now: number): boolean {
    return at <= now && now - at < this.config.revocationCacheMs;
  }

  /** The census if still fresh, else one count shared by every caller waiting for it. */
  private currentCensus(now: number): Promise<Census> {
    if (this.census && this.fresh(this.census.at, now)) return Promise.resolve(this.census);
    this.counting ??= this.count().finally(() => (this.counting = undefined));
    return this.counting;
  }

  private async count(): Promise<Census> {
    const at = this.clock.now();
    const census = { count: await this.revocations.revokedCount(), at };
    this.census = census;
    return census;
  }
}
