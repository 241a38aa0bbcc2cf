import { CertificateRevocationRepository } from '@ql/domain';
import { ControlPlaneConfig } from '../config/config';
import { RevocationCache } from './revocation-cache';

// R-ID-4 per replica; test/e2e/identity-strictness.e2e-spec.ts shows it on two replicas through the ingress.
describe('RevocationCache', () => {
  let now = Date.UTC(2026, 11, 1);
  let revoked = false;
  let lookups = 0;
  const repository = {
    isRevoked: async () => (lookups++, revoked),
  } as unknown as CertificateRevocationRepository;
  const cache = () =>
    new RevocationCache(repository, { revocationCacheMs: 2_000 } as ControlPlaneConfig, { now: () => now });

  beforeEach(() => {
    revoked = false;
    lookups = 0;
  });

  it('trusts a look for less than QL_REVOCATION_CACHE_MS by its clock, then looks again', async () => {
    const c = cache();
    expect(await c.isRevoked('f')).toBe(false);
    revoked = true;
    now += 1_999;
    expect(await c.isRevoked('f')).toBe(false);
    now += 1;
    expect(await c.isRevoked('f')).toBe(true);
    expect(lookups).toBe(2);
  });

  it('a clock stepped back does not stretch the window', async () => {
    const c = cache();
    expect(await c.isRevoked('f')).toBe(false);
    revoked = true;
    now -= 60_000;
    expect(await c.isRevoked('f')).toBe(true);
  });
});
