import { CertificateRevocationRepository } from '@ql/domain';
import { ControlPlaneConfig } from '../config/config';
import { RevocationCache } from './revocation-cache';

// R-ID-4 per replica; test/e2e/identity-strictness.e2e-spec.ts shows it on two replicas through the ingress.
describe('RevocationCache', () => {
  let now = Date.UTC(2026, 11, 1);
  let revoked = new Set<string>();
  let lookups = 0;
  let counts = 0;
  /** Resolves the counts in flight when the test says so (undefined: at once). */
  let countGate: Promise<void> | undefined;
  const repository = {
    lookUp: async (fingerprint: string) => (
      lookups++, { revoked: revoked.has(fingerprint), revokedCount: revoked.size }
    ),
    revokedCount: async () => {
      counts++;
      const size = revoked.size;
      await countGate;
      return size;
    },
  } as unknown as CertificateRevocationRepository;
  const cache = (revocationCacheMs = 2_000) =>
    new RevocationCache(repository, { revocationCacheMs } as ControlPlaneConfig, { now: () => now });
  /** A cache that has looked `a` and `b` up, found neither revoked, and seen both entries expire. */
  const expiredAB = async () => {
    const c = cache();
    expect(await c.isRevoked('a')).toBe(false);
    expect(await c.isRevoked('b')).toBe(false);
    now += 2_000;
    return c;
  };

  beforeEach(() => {
    revoked = new Set();
    lookups = 0;
    counts = 0;
    countGate = undefined;
  });

  it('trusts a look for less than QL_REVOCATION_CACHE_MS by its clock, then looks again', async () => {
    const c = cache();
    expect(await c.isRevoked('f')).toBe(false);
    revoked.add('f');
    now += 1_999;
    expect(await c.isRevoked('f')).toBe(false);
    now += 1;
    expect(await c.isRevoked('f')).toBe(true);
    expect(lookups).toBe(2);
  });

  it('with QL_REVOCATION_CACHE_MS 0, each call is one lookup and nothing else', async () => {
    const c = cache(0);
    expect(await c.isRevoked('f')).toBe(false);
    expect(await c.isRevoked('f')).toBe(false);
    revoked.add('f');
    expect(await c.isRevoked('f')).toBe(true);
    expect({ lookups, counts }).toEqual({ lookups: 3, counts: 0 });
  });

  it('a clock stepped back does not stretch the window', async () => {
    const c = cache();
    expect(await c.isRevoked('f')).toBe(false);
    revoked.add('f');
    now -= 60_000;
    expect(await c.isRevoked('f')).toBe(true);
  });

  it('while nothing is revoked, one count per window renews every fingerprint', async () => {
    const c = await expiredAB();
    for (let window = 0; window < 3; window++) {
      expect(await c.isRevoked('a')).toBe(false);
      expect(await c.isRevoked('b')).toBe(false);
      now += 2_000;
    }
    expect({ lookups, counts }).toEqual({ lookups: 2, counts: 3 });
  });

  it('a revocation of another certificate sends each expired fingerprint back to its own lookup', async () => {
    const c = await expiredAB();
    revoked.add('b');
    expect(await c.isRevoked('a')).toBe(false);
    expect(await c.isRevoked('b')).toBe(true);
    expect({ lookups, counts }).toEqual({ lookups: 4, counts: 1 });
  });

  it('callers waiting for a count share it', async () => {
    const c = await expiredAB();
    let open!: () => void;
    countGate = new Promise((resolve) => (open = resolve));
    const both = Promise.all([c.isRevoked('a'), c.isRevoked('b')]);
    open();
    expect(await both).toEqual([false, false]);
    expect({ lookups, counts }).toEqual({ lookups: 2, counts: 1 });
  });

  it('a count that took longer than the window renews nothing', async () => {
    const c = cache();
    expect(await c.isRevoked('a')).toBe(false);
    now += 2_000;
    let open!: () => void;
    countGate = new Promise((resolve) => (open = resolve));
    const pending = c.isRevoked('a');
    now += 2_000;
    open();
    expect(await pending).toBe(false);
    expect({ lookups, counts }).toEqual({ lookups: 2, counts: 1 });
  });
});
