import { Inject, Injectable, Logger } from '@nestjs/common';
import {
  AuditEntry,
  EnrollmentRefusedError,
  WORKER_CERTIFICATE_REPOSITORY,
  WorkerCertificateRecord,
  WorkerCertificateRepository,
} from '@ql/domain';
import { IngressErrorCode, IssuedCertificateResponse } from '@ql/contracts';
import { CORE, ControlPlaneCore } from '../core/core';
import { IngressRefusal } from '../http/ingress-errors';
import { retryAfterSeconds } from '../identity/ingress-rate-limit';
import { RateLimiter } from '../identity/rate-limiter';
import type { EnrollDto } from './dto/enroll.dto';
import { EnrollmentTokensService } from './enrollment-tokens.service';
import { AcceptedCsr, CsrRefusedError, acceptCsr, signWorkerCertificate } from './worker-certificate-signer';
import { WorkerIssuer } from './worker-issuer';
import { EnrollmentRefusalAudit } from './refusal-audit';

/**
 * Joining (ADR 0045 §2): the one ingress route served without a trusted client certificate. Per
 * source address it is rate limited first (`QL_ENROLL_RATE_PER_MINUTE`); then the CSR is read (a
 * refusal leaves the token unused); then the token is consumed and the certificate signed and
 * recorded in one transaction. A refusal writes nothing but its audit row, and those are bounded per
 * source address (`EnrollmentRefusalAudit`).
 */
@Injectable()
export class WorkerEnrollmentService {
  private readonly logger = new Logger('enrollment');
  private readonly perSource: RateLimiter;
  private readonly issuer: WorkerIssuer | undefined;

  constructor(
    @Inject(CORE) core: ControlPlaneCore,
    private readonly tokens: EnrollmentTokensService,
    @Inject(WORKER_CERTIFICATE_REPOSITORY) private readonly certificates: WorkerCertificateRepository,
    private readonly refusals: EnrollmentRefusalAudit,
  ) {
    const perMinute = core.config.enrollRatePerMinute;
    this.perSource = new RateLimiter({ perSecond: perMinute / 60, burst: perMinute });
    this.issuer = core.workerIssuer;
  }

  async enroll(body: EnrollDto, source: string): Promise<IssuedCertificateResponse> {
    const waitMs = this.perSource.take(source);
    if (waitMs > 0) {
      const seconds = retryAfterSeconds(waitMs);
      throw new IngressRefusal(
        429,
        'worker_rate_limited',
        `too many enrollments from this address; retry after ${seconds} s`,
        seconds,
      );
    }
    const issuer = this.issuerOrRefuse();
    const { workerId } = body;
    const csr = await this.acceptOrRefuse(issuer, body.csr, workerId, 'enrollment.csr_refuse', (entry) =>
      this.refusals.refused(source, 'csr_refused', entry),
    );
    try {
      const use = await this.tokens.consume(workerId, body.token, (at) =>
        signWorkerCertificate(issuer, csr, at),
      );
      this.logger.log({ msg: 'worker enrolled', workerId, fingerprint: use.certificate!.fingerprint });
      return issuedResponse(issuer, use.certificate!);
    } catch (error) {
      if (!(error instanceof EnrollmentRefusedError)) throw error;
      if (error.code === 'enrollment_token_used') {
        const replayed = await this.replayed(workerId, csr);
        if (replayed) return issuedResponse(issuer, replayed);
      }
      await this.refusals.refused(source, error.code, {
        actor: `worker:${workerId}`,
        action: 'enrollment_token.refuse',
        target: `enrollment_token:${error.tokenId ?? 'unknown'}`,
        detail: { workerId, code: error.code },
      });
      throw error;
    }
  }

  /**
   * A lost answer (ADR 0045 "as built"): the worker sends its token again with the CSR of the key it
   * kept (`<key>.pending`). When the token was used by this worker id and the worker's current
   * certificate is that enrollment's, for that very key (the CSR's signature proves possession), it is
   * the answer again: nothing is signed or superseded, an audit row says so. Any other key is refused.
   */
  private async replayed(workerId: string, csr: AcceptedCsr): Promise<WorkerCertificateRecord | null> {
    const current = await this.certificates.current(workerId);
    if (
      !current ||
      current.renewedFrom !== null ||
      current.revokedAt !== null ||
      current.supersededBy !== null ||
      current.publicKeyDigest !== csr.publicKeyDigest
    )
      return null;
    await this.certificates.auditRefusal({
      actor: `worker:${workerId}`,
      action: 'enrollment.replay',
      target: `worker:${workerId}`,
      detail: { workerId, fingerprint: current.fingerprint },
    });
    this.logger.log({ msg: 'worker enrollment replayed', workerId, fingerprint: current.fingerprint });
    return current;
  }

  /** 503 `enrollment_disabled` without an issuer (ADR 0045 §5). */
  issuerOrRefuse(): WorkerIssuer {
    if (!this.issuer)
      throw new IngressRefusal(
        503,
        'enrollment_disabled',
        'this control plane issues no worker certificates (QL_WORKER_ISSUER_CERT is not set)',
      );
    return this.issuer;
  }

  /** The CSR's rules (ADR 0045 §2); a refusal is 400 `csr_refused` with the rule as `reason`, audited. */
  async acceptOrRefuse(
    issuer: WorkerIssuer,
    pem: string,
    workerId: string,
    action: string,
    audit: (entry: AuditEntry) => Promise<void> = (entry) => this.certificates.auditRefusal(entry),
  ): Promise<AcceptedCsr> {
    try {
      return await acceptCsr(pem, workerId, issuer.trustDomain);
    } catch (error) {
      if (!(error instanceof CsrRefusedError)) throw error;
      await audit({
        actor: `worker:${workerId}`,
        action,
        target: `worker:${workerId}`,
        detail: { workerId, code: 'csr_refused', reason: error.reason },
      });
      this.logger.warn({ msg: 'csr refused', workerId, reason: error.reason });
      throw new IngressRefusal(
        400,
        'csr_refused' satisfies IngressErrorCode,
        error.message,
        undefined,
        error.reason,
      );
    }
  }
}

export function issuedResponse(
  issuer: WorkerIssuer,
  certificate: WorkerCertificateRecord,
): IssuedCertificateResponse {
  return {
    workerId: certificate.workerId,
    certificatePem: certificate.certificatePem,
    chainPem: issuer.chainPem,
    fingerprint: certificate.fingerprint,
    serial: certificate.serial,
    notAfter: new Date(certificate.notAfter).toISOString(),
  };
}
