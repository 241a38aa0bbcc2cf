import { Module } from '@nestjs/common';
import { EnrollmentTokensController } from './enrollment-tokens.controller';
import { EnrollmentTokensService } from './enrollment-tokens.service';
import { EnrollmentIngressController } from './enrollment-ingress.controller';
import { WorkerEnrollmentService } from './worker-enrollment.service';
import { CertificateIngressController } from './certificate-ingress.controller';
import { CertificateRotationService } from './certificate-rotation.service';
import { IdentityModule } from '../identity/identity.module';
import { EnrollmentRefusalAudit } from './refusal-audit';

/**
 * Enrollment tokens' service, for any listener: the admin module below serves it on the admin API,
 * and the enrollment route of the ingress (ADR 0045 §2) imports this module to consume tokens.
 */
@Module({
  providers: [EnrollmentTokensService],
  exports: [EnrollmentTokensService],
})
export class EnrollmentTokensModule {}

/** Enrollment tokens on the admin listener: create, list, revoke (ADR 0045 §1). */
@Module({
  imports: [EnrollmentTokensModule],
  controllers: [EnrollmentTokensController],
})
export class EnrollmentAdminModule {}

/**
 * Joining and rotation on the ingress listener (ADR 0045 §2, §3): `POST /api/v3/worker-ingress/enroll`
 * and, over mTLS, `POST …/workers/{workerId}/certificate`.
 */
@Module({
  imports: [EnrollmentTokensModule, IdentityModule],
  controllers: [EnrollmentIngressController, CertificateIngressController],
  providers: [WorkerEnrollmentService, CertificateRotationService, EnrollmentRefusalAudit],
})
export class EnrollmentIngressModule {}
