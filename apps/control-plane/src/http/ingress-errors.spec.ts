import { ENROLLMENT_REFUSALS, EnrollmentRefusedError, RefusedError } from '@ql/domain';
import { IngressRefusal, renderIngressError } from './ingress-errors';

/**
 * Issue 30 item 7: a rule's refusal is a domain `RefusedError`; the ingress gives it the status and body
 * the services answered with when they threw `IngressRefusal` themselves (the e2e tests pin the routes).
 */
describe('renderIngressError: refusals decided by domain rules', () => {
  it('answers each enrollment refusal as before: 403 for a token that is no good, 409 for one spent', () => {
    const statuses = Object.fromEntries(
      ENROLLMENT_REFUSALS.map((code) => [code, renderIngressError(new EnrollmentRefusedError(code)).status]),
    );
    expect(statuses).toEqual({
      enrollment_token_invalid: 403,
      enrollment_token_wrong_worker: 403,
      enrollment_token_used: 409,
      enrollment_token_exhausted: 409,
      enrollment_token_may_not_replace: 409,
      worker_disabled: 403,
    });
    expect(renderIngressError(new EnrollmentRefusedError('enrollment_token_used', 'tok-1')).body).toEqual({
      code: 'enrollment_token_used',
      message: 'enrollment refused: enrollment_token_used',
    });
    expect(renderIngressError(new EnrollmentRefusedError('worker_disabled')).body).toEqual({
      code: 'worker_disabled',
      message: 'this worker is disabled: an admin enables it first',
    });
  });

  it('renders a certificate or secrets refusal with the status, code, message and reason IngressRefusal had', () => {
    const cases: [RefusedError, IngressRefusal][] = [
      [
        new RefusedError('certificate_revoked', 'revoked'),
        new IngressRefusal(403, 'certificate_revoked', 'revoked'),
      ],
      [
        new RefusedError('certificate_unknown', 'unknown'),
        new IngressRefusal(403, 'certificate_unknown', 'unknown'),
      ],
      [
        new RefusedError('worker_disabled', 'disabled'),
        new IngressRefusal(403, 'worker_disabled', 'disabled'),
      ],
      [
        new RefusedError('certificate_superseded', 'forked'),
        new IngressRefusal(409, 'certificate_superseded', 'forked'),
      ],
      [
        new RefusedError('secrets_unavailable', 'gone', 'secret_missing'),
        new IngressRefusal(422, 'secrets_unavailable', 'gone', undefined, 'secret_missing'),
      ],
    ];
    for (const [refused, before] of cases)
      expect(renderIngressError(refused)).toEqual(renderIngressError(before));
  });

  it('a refusal code the edge has no status for is a programming error: 503, never a made-up 4xx', () => {
    expect(renderIngressError(new RefusedError('worker_rate_limited', 'no status for it'))).toEqual({
      status: 503,
      body: { code: 'worker_ingress_unavailable', message: 'the control plane cannot serve this now' },
    });
  });
});
