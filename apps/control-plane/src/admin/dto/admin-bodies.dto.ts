import { API_KEY_ROLES, ApiKeyRole } from '@ql/domain';
import { EnumField, TextField } from '../../http/validation/dto-fields';
import {
  API_KEY_NAME_MAX_LENGTH,
  FINGERPRINT_MAX_LENGTH,
  REVOCATION_REASON_MAX_LENGTH,
} from '../admin-limits';

/** `POST /api/v1/api-keys` (R-ID-5). */
export class CreateApiKeyDto {
  @TextField({ max: API_KEY_NAME_MAX_LENGTH }, { description: 'who or what uses the key' })
  name!: string;

  @EnumField(API_KEY_ROLES, { description: 'viewer < admin' })
  role!: ApiKeyRole;
}

/** `POST /api/v1/certificates/revoke` (R-ID-4); the hex check is the service's. */
export class RevokeCertificateDto {
  @TextField(
    { max: FINGERPRINT_MAX_LENGTH },
    { description: 'SHA-256 fingerprint: 64 hex digits; colons and case are ignored' },
  )
  fingerprint!: string;

  @TextField({ max: REVOCATION_REASON_MAX_LENGTH }, { presence: 'optional' })
  reason?: string;
}
