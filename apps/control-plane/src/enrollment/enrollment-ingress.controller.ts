import { Body, Controller, HttpCode, Post, Req } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import type { FastifyRequest } from 'fastify';
import { INGRESS_ENROLL_PATH, ingressBodyLimit } from '@ql/contracts';
import { IngressErrorResponses } from '../http/error-responses';
import { INGRESS_TAG } from '../http/ingress-docs';
import { EnrollDto, IssuedCertificateDto } from './dto/enroll.dto';
import { WorkerEnrollmentService } from './worker-enrollment.service';

const ENROLL_ANSWERS = [
  [
    400,
    ['invalid_worker_request', 'csr_refused'],
    'the body breaks a rule; or the CSR does (`reason`: not_a_csr, bad_signature, weak_key, subject_alt_name, ca, key_usage, extended_key_usage), audited; the token stays unused',
  ],
  [
    403,
    ['enrollment_token_invalid', 'enrollment_token_wrong_worker', 'worker_disabled'],
    'the token is unknown, malformed, expired or revoked, or names another worker id; or the worker is disabled; audited (per source address, bounded)',
  ],
  [
    409,
    ['enrollment_token_used', 'enrollment_token_exhausted', 'enrollment_token_may_not_replace'],
    'this worker id already enrolled with the token, or the pattern’s count is used up, or a pattern token without `mayReplace` names an id with a current certificate or a live session; audited (per source address, bounded)',
  ],
  [
    429,
    ['worker_rate_limited'],
    'over `QL_ENROLL_RATE_PER_MINUTE` from this source address; `Retry-After` says when',
  ],
  [
    503,
    ['enrollment_disabled', 'worker_ingress_unavailable'],
    'no issuer is configured (`QL_WORKER_ISSUER_CERT`), or the control plane cannot serve this now',
  ],
] as const;

/**
 * `POST /api/v3/worker-ingress/enroll` (ADR 0045 §2): served on a connection without a trusted
 * client certificate (the ingress's certificate gate lets this path alone through), so no
 * `MtlsPrincipalGuard`: the token is the credential.
 */
@Controller()
@ApiTags(INGRESS_TAG)
export class EnrollmentIngressController {
  constructor(private readonly enrollment: WorkerEnrollmentService) {}

  @Post(INGRESS_ENROLL_PATH.slice(1))
  @HttpCode(200)
  @ApiOperation({
    summary: 'Join: an enrollment token and a CSR over the worker’s own key give a short-lived certificate',
    operationId: 'ingress_enroll',
    description: `No client certificate needed. Rate limited per source address (\`QL_ENROLL_RATE_PER_MINUTE\`). Body at most ${ingressBodyLimit('enroll') / 1024} KiB of strict JSON; unknown fields are refused.`,
  })
  @ApiOkResponse({ type: IssuedCertificateDto })
  @IngressErrorResponses([], ENROLL_ANSWERS)
  enroll(@Req() request: FastifyRequest, @Body() body: EnrollDto) {
    return this.enrollment.enroll(body, request.ip);
  }
}
