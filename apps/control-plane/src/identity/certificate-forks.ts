import { Inject, Injectable, Logger } from '@nestjs/common';
import { RefusedError, WORKER_CERTIFICATE_REPOSITORY, WorkerCertificateRepository } from '@ql/domain';
import { ControlPlaneMetrics } from '../metrics/control-plane-metrics';

/**
 * One current certificate per worker (ADR 0045 §4): a superseded certificate presented to renew or
 * register means the worker's identity was used from a second machine. It is refused, loudly: 409
 * `certificate_superseded`, an audit row `worker.certificate_fork` naming both certificates, and
 * `ql_worker_certificate_forks_total`.
 */
@Injectable()
export class CertificateForks {
  private readonly logger = new Logger('enrollment');

  constructor(
    @Inject(WORKER_CERTIFICATE_REPOSITORY) private readonly certificates: WorkerCertificateRepository,
    private readonly metrics: ControlPlaneMetrics,
  ) {}

  /** The fork audit entry (the renewal writes it in its own transaction). */
  static audit(workerId: string, presented: string, current: string | null, on: 'renew' | 'register') {
    return {
      actor: `worker:${workerId}`,
      action: 'worker.certificate_fork',
      target: `worker:${workerId}`,
      detail: { workerId, presented, current, on },
    };
  }

  /** Counts and logs a fork the caller has audited, and answers its refusal. */
  refused(workerId: string, presented: string, current: string | null): RefusedError {
    this.metrics.certificateFork();
    this.logger.warn({ msg: 'worker certificate fork', workerId, presented, current });
    return new RefusedError(
      'certificate_superseded',
      'this certificate was renewed already, with another key: the worker identity is in use on another machine; revoke the worker and enroll the machine again',
    );
  }

  /** Register's check: a certificate issued here and since superseded may not start a session. */
  async checkRegister(workerId: string, fingerprint: string): Promise<void> {
    const presented = await this.certificates.find(fingerprint);
    if (!presented || presented.supersededBy === null) return;
    const current = await this.certificates.current(workerId);
    await this.certificates.auditRefusal(
      CertificateForks.audit(workerId, fingerprint, current?.fingerprint ?? null, 'register'),
    );
    throw this.refused(workerId, fingerprint, current?.fingerprint ?? null);
  }
}
