import { ApiProperty } from '@nestjs/swagger';
import { WORKER_ID_PATTERN } from '@ql/domain';
import { TextField } from '../../http/validation/dto-fields';

/** `POST /api/v3/worker-ingress/enroll` (ADR 0045 §2): who joins, with which token, and its key's CSR. */
export class EnrollDto {
  @TextField({ max: 63, pattern: WORKER_ID_PATTERN }, { description: 'the worker id to enroll' })
  workerId!: string;

  @TextField({ max: 256 }, { description: 'the enrollment token (`qlet_…`) an admin made for this id' })
  token!: string;

  @TextField(
    { max: 15 * 1024, multiline: true },
    { description: 'PEM PKCS#10 request over a key the worker made (EC P-256/P-384, Ed25519 or RSA ≥ 2048)' },
  )
  csr!: string;
}

/** `POST …/workers/{workerId}/certificate` (ADR 0045 §3): a CSR over a new key. */
export class RenewCertificateDto {
  @TextField(
    { max: 15 * 1024, multiline: true },
    { description: 'PEM PKCS#10 request over a new key made for this renewal' },
  )
  csr!: string;
}

/** The certificate issued, and its chain (PEM). */
export class IssuedCertificateDto {
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
