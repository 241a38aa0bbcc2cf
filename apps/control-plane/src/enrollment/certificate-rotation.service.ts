import { Inject, Injectable, Logger } from '@nestjs/common';
import {
  CLOCK,
  Clock,
  RefusedError,
  RenewalRefusal,
  WORKER_CERTIFICATE_REPOSITORY,
  WORKER_SESSION_REPOSITORY,
  WorkerCertificateRepository,
  WorkerSessionRepository,
} from '@ql/domain';
import { IssuedCertificateResponse } from '@ql/contracts';
import { CertificateForks } from '../identity/certificate-forks';
import { WorkerPrincipal } from '../identity/worker-principal';
import type { RenewCertificateDto } from './dto/enroll.dto';
import { signWorkerCertificate } from './worker-certificate-signer';
import { WorkerEnrollmentService, issuedResponse } from './worker-enrollment.service';

const REFUSALS: Record<Exclude<RenewalRefusal, 'certificate_superseded'>, string> = {
  certificate_revoked: 'this certificate is revoked: enroll the machine again with a new token',
  certificate_unknown:
    'this certificate was not issued by this control plane to this worker: enroll with a token',
};

/**
 * Rotation (ADR 0045 §3, §4): over mTLS with the worker's current certificate, a CSR over a new key
 * gives a new certificate that supersedes the one presented. The same key again with the superseded
 * certificate is a replay (the answer already given); any other use of a superseded certificate is
 * a fork.
 */
@Injectable()
export class CertificateRotationService {
  private readonly logger = new Logger('enrollment');

  constructor(
    private readonly enrollment: WorkerEnrollmentService,
    private readonly forks: CertificateForks,
    @Inject(WORKER_CERTIFICATE_REPOSITORY) private readonly certificates: WorkerCertificateRepository,
    @Inject(WORKER_SESSION_REPOSITORY) private readonly sessions: WorkerSessionRepository,
    @Inject(CLOCK) private readonly clock: Clock,
  ) {}

  async renew(principal: WorkerPrincipal, body: RenewCertificateDto): Promise<IssuedCertificateResponse> {
    const issuer = this.enrollment.issuerOrRefuse();
    const { workerId, fingerprint256: presented } = principal;
    const actor = `worker:${workerId}`;
    // A worker that never registered has no row yet: a new one renews at its first start.
    if ((await this.sessions.findWorker(workerId))?.disabled) {
      await this.certificates.auditRefusal({
        actor,
        action: 'worker.certificate_refuse',
        target: actor,
        detail: { workerId, code: 'worker_disabled', presented },
      });
      throw new RefusedError('worker_disabled', 'this worker is disabled: an admin enables it first');
    }
    const csr = await this.enrollment.acceptOrRefuse(
      issuer,
      body.csr,
      workerId,
      'worker.certificate_csr_refuse',
    );
    const at = this.clock.now();
    const outcome = await this.certificates.renew(
      { workerId, presented, publicKeyDigest: csr.publicKeyDigest },
      () => signWorkerCertificate(issuer, csr, at),
      {
        renewed: {
          actor,
          action: 'worker.certificate_renew',
          target: actor,
          detail: { workerId, presented },
        },
        refused: (code, current) =>
          code === 'certificate_superseded'
            ? CertificateForks.audit(workerId, presented, current, 'renew')
            : {
                actor,
                action: 'worker.certificate_refuse',
                target: actor,
                detail: { workerId, code, presented },
              },
      },
    );
    if (outcome.kind === 'refused') {
      if (outcome.code === 'certificate_superseded')
        throw this.forks.refused(workerId, presented, outcome.current);
      throw new RefusedError(outcome.code, REFUSALS[outcome.code]);
    }
    this.logger.log({
      msg: outcome.kind === 'renewed' ? 'worker certificate renewed' : 'worker certificate renewal replayed',
      workerId,
      fingerprint: outcome.certificate.fingerprint,
    });
    return issuedResponse(issuer, outcome.certificate);
  }
}
