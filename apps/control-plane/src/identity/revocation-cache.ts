import { Inject, Injectable } from '@nestjs/common';
import { CERTIFICATE_REVOCATION_REPOSITORY, CLOCK, CertificateRevocationRepository, Clock } from '@ql/domain';
import { CONFIG } from '../core/core';
import { ControlPlaneConfig } from '../config/config';

const MAX_ENTRIES = 10_000;

/**
 * Remembers a fingerprint's revocation state for QL_REVOCATION_CACHE_MS (≤ 5 s, R-ID-4), so a busy
 * worker costs one lookup per period, not one per call. No timer: entries expire on read.
 */
@Injectable()
export class RevocationCache {
  private readonly entries = new Map<string, { revoked: boolean; at: number }>();

  constructor(
    @Inject(CERTIFICATE_REVOCATION_REPOSITORY) private readonly revocations: CertificateRevocationRepository,
    @Inject(CONFIG) private readonly config: ControlPlaneConfig,
    @Inject(CLOCK) private readonly clock: Clock,
  ) {}

  async isRevoked(fingerprint: string): Promise<boolean> {
    const now = this.clock.now();
    const hit = this.entries.get(fingerprint);
    // A clock stepped back must not stretch the window: an entry from the "future" is stale.
    if (hit && hit.at <= now && now - hit.at < this.config.revocationCacheMs) return hit.revoked;
    const revoked = await this.revocations.isRevoked(fingerprint);
    if (this.entries.size >= MAX_ENTRIES) this.entries.clear();
    this.entries.set(fingerprint, { revoked, at: now });
    return revoked;
  }
}
