import { ApiProperty } from '@nestjs/swagger';
import { WORKER_ID_PATTERN } from '@ql/domain';
import {
  CSR_MAX_LENGTH,
  CertificateRequest,
  ENROLLMENT_TOKEN_MAX_LENGTH,
  EnrollRequest,
  IssuedCertificateResponse,
} from '@ql/contracts';
import { TextField } from '../../http/validation/dto-fields';

/** `POST /api/v3/worker-ingress/enroll` (ADR 0045 §2): who joins, with which token, and its key's CSR. */
export class EnrollDto implements EnrollRequest {
  @TextField({ max: 63, pattern: WORKER_ID_PATTERN }, { description: 'the worker id to enroll' })
  workerId!: string;

  @TextField(
    { max: ENROLLMENT_TOKEN_MAX_LENGTH },
    { description: 'the enrollment token (`qlet_…`) an admin made for this id' },
  )
  token!: string;

  @TextField(
    { max: CSR_MAX_LENGTH, multiline: true },
    { description: 'PEM PKCS#10 request over a key the worker made (EC P-256/P-384, Ed25519 or RSA ≥ 2048)' },
  )
  csr!: string;
}

/** `POST …/workers/{workerId}/certificate` (ADR 0045 §3): a CSR over a new key. */
export class RenewCertificateDto implements CertificateRequest {
  @TextField(
    { max: CSR_MAX_LENGTH, multiline: true },
    { description: 'PEM PKCS#10 request over a new key made for this renewal' },
  )
  csr!: string;
}

/** The certificate issued, and its chain (PEM). */
export class IssuedCertificateDto implements IssuedCertificateResponse {
  @ApiProperty({ pattern: WORKER_ID_PATTERN.source })
  workerId!: string;
  @ApiProperty({ description: 'the certificate, PEM' })
  certificatePem!: string;
  @ApiProperty({
    description: 'the issuer and the certificates after it in its file, PEM: send them with the certificate',
  })
  chainPem!: string;
  @ApiProperty({ description: 'SHA-256 of the certificate (DER), lower-case hex' })
  fingerprint!: string;
  @ApiProperty({ description: 'lower-case hex' })
  serial!: string;
  @ApiProperty({ format: 'date-time' })
  notAfter!: string;
}
