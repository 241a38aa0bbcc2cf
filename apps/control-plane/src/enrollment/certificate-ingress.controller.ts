import { Body, Controller, HttpCode, Post, UseGuards } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiParam, ApiSecurity, ApiTags } from '@nestjs/swagger';
import { INGRESS_CERTIFICATE_ACTION, INGRESS_PREFIX, ingressBodyLimit } from '@ql/contracts';
import { WORKER_ID_PATTERN } from '@ql/domain';
import { IngressErrorResponses } from '../http/error-responses';
import { INGRESS_SECURITY, INGRESS_TAG } from '../http/ingress-docs';
import { MtlsPrincipalGuard, Principal } from '../identity/mtls-principal.guard';
import { WorkerPrincipal } from '../identity/worker-principal';
import { CertificateRotationService } from './certificate-rotation.service';
import { IssuedCertificateDto, RenewCertificateDto } from './dto/enroll.dto';

const RENEW_ANSWERS = [
  [
    400,
    ['invalid_worker_request', 'csr_refused'],
    'the body breaks a rule; or the CSR does (`reason` says which), audited',
  ],
  [
    403,
    ['worker_disabled', 'certificate_revoked', 'certificate_unknown'],
    'the worker is disabled; the certificate is revoked (a deleted worker’s are); or it was not issued here to this worker (enroll instead); audited',
  ],
  [
    409,
    ['certificate_superseded'],
    'the certificate was renewed already with another key: the identity is in use elsewhere; audited as `worker.certificate_fork`, counted in `ql_worker_certificate_forks_total`',
  ],
  [
    503,
    ['enrollment_disabled', 'worker_ingress_unavailable'],
    'no issuer is configured, or the control plane cannot serve this now',
  ],
] as const;

/** Rotation over mTLS (ADR 0045 §3): `POST …/workers/{workerId}/certificate`. */
@Controller(`${INGRESS_PREFIX.slice(1)}/:workerId`)
@UseGuards(MtlsPrincipalGuard)
@ApiTags(INGRESS_TAG)
@ApiSecurity(INGRESS_SECURITY)
export class CertificateIngressController {
  constructor(private readonly rotation: CertificateRotationService) {}

  @Post(INGRESS_CERTIFICATE_ACTION)
  @HttpCode(200)
  @ApiParam({
    name: 'workerId',
    schema: { type: 'string', pattern: WORKER_ID_PATTERN.source },
    description: 'must be the worker id of the client certificate',
  })
  @ApiOperation({
    summary:
      'Renew: a CSR over a new key, with the current certificate, gives the next one and supersedes it',
    operationId: 'ingress_certificate',
    description: `Body at most ${ingressBodyLimit(INGRESS_CERTIFICATE_ACTION) / 1024} KiB of strict JSON; unknown fields are refused. The same CSR key sent again with the superseded certificate answers the certificate already issued (a renewal whose answer was lost).`,
  })
  @ApiOkResponse({ type: IssuedCertificateDto })
  @IngressErrorResponses([], RENEW_ANSWERS)
  renew(@Principal() principal: WorkerPrincipal, @Body() body: RenewCertificateDto) {
    return this.rotation.renew(principal, body);
  }
}
