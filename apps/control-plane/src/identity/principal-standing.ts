import { Inject, Injectable } from '@nestjs/common';
import { CLOCK, Clock } from '@ql/domain';
import { IngressRefusal } from '../http/ingress-errors';
import { RevocationCache } from './revocation-cache';
import { WorkerPrincipal, validityRefusal } from './worker-principal';

const WHY = {
  not_yet_valid: 'the certificate is not valid yet',
  expired: 'the certificate has expired',
} as const;

/**
 * Whether a principal's certificate may still speak: inside its validity window now, and not revoked
 * (through the revocation cache, ≤ QL_REVOCATION_CACHE_MS old). The mTLS guard asks on every request;
 * a held pull asks again before each claim it makes while held (ADR 0033), because it may wait far
 * longer than the cache window. A refusal is the edge's own: 401 `worker_authentication_required`, or 401 `certificate_revoked`.
 */
@Injectable()
export class PrincipalStanding {
  constructor(
    private readonly revocations: RevocationCache,
    @Inject(CLOCK) private readonly clock: Clock,
  ) {}

  async check(principal: WorkerPrincipal): Promise<void> {
    const invalid = validityRefusal(principal, this.clock.now());
    if (invalid) throw new IngressRefusal(401, 'worker_authentication_required', WHY[invalid]);
    // Its own code, so the worker knows to stop, put the certificate aside and wait for a token (ADR 0055).
    if (await this.revocations.isRevoked(principal.fingerprint256)) {
      throw new IngressRefusal(
        401,
        'certificate_revoked',
        'this certificate has been revoked: enroll the machine again with a new token',
      );
    }
  }
}
