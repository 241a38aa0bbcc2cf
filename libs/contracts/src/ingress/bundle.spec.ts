import { BUNDLE, BUNDLE_MEDIA_TYPE, buildBundleRequest, parseBundleRequest } from './bundle';
import { fieldsAfter } from './call';
import { refusalOf } from './golden';

const digest = 'ab'.repeat(32);
const lease = {
  offerId: '01938e1e-0000-7000-8000-00000000f401',
  leaseToken: 'Bb'.repeat(22),
  leaseGeneration: 1,
  leaseVersion: 0,
};

describe('bundle (ingress/bundle.ts)', () => {
  it('builds the golden body (the lease fence and the digest) and the control plane reads it', () => {
    const body = buildBundleRequest({ generation: 2, expectedVersion: 5 }, { digest, ...lease });
    expect(JSON.stringify(body)).toBe(
      `{"generation":2,"expectedVersion":5,"offerId":"${lease.offerId}","leaseToken":"${lease.leaseToken}","leaseGeneration":1,"leaseVersion":0,"digest":"${digest}"}`,
    );
    expect(parseBundleRequest(body)).toEqual(body);
  });

  it('refuses unknown fields and a digest that is not SHA-256 hex', () => {
    const body = buildBundleRequest({ generation: 2, expectedVersion: 5 }, { digest, ...lease });
    expect(refusalOf(() => parseBundleRequest({ ...body, 目录: 'scripts' }))).toBe('目录: unknown_field');
    expect(refusalOf(() => parseBundleRequest({ ...body, digest: digest.toUpperCase() }))).toBe(
      'digest: invalid_format',
    );
    expect(refusalOf(() => parseBundleRequest({ ...body, digest: `${digest}00` }))).toBe('digest: too_long');
  });

  it('answers bytes, not JSON; v1 but for the refusal of an attempt no longer starting', () => {
    expect(BUNDLE_MEDIA_TYPE).toBe('application/octet-stream');
    expect(fieldsAfter(BUNDLE, 1, 'request')).toEqual([]);
    expect(fieldsAfter(BUNDLE, 1, 'answer')).toEqual([]);
    expect(BUNDLE.refusals.filter((r) => r.since === 2)).toEqual([
      { status: 409, code: 'worker_lease_fenced', reason: 'attempt_not_starting', since: 2 },
    ]);
  });
});
