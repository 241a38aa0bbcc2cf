import { ApiProperty } from '@nestjs/swagger';
import { API_KEY_ROLES, ApiKeyRole } from '@ql/domain';
import { TextField } from '../../http/validation/dto-fields';
import { ListOf, TIME_PROP, NULLABLE_TIME_PROP, UUID_V7_PROP } from '../../http/view-props';

/** `POST /api/v1/session`: sign in with an API key, once; the key is not kept anywhere. */
export class SignInDto {
  @TextField({ max: 64 }, { description: 'an API key (`qlk_…`); exchanged for a session cookie' })
  apiKey!: string;
}

/** A console session as listed by admins: never its token or digest. */
export class ConsoleSessionDto {
  @ApiProperty(UUID_V7_PROP)
  readonly id!: string;
  @ApiProperty({ format: 'uuid', description: 'the API key it acts for (its role, its audit actor)' })
  readonly apiKeyId!: string;
  @ApiProperty(TIME_PROP)
  readonly createdAt!: string;
  @ApiProperty(TIME_PROP)
  readonly lastSeenAt!: string;
  @ApiProperty({ type: 'integer', description: 'it ends after this long without a request' })
  readonly idleTimeoutMs!: number;
  @ApiProperty(TIME_PROP)
  readonly expiresAt!: string;
  @ApiProperty(NULLABLE_TIME_PROP)
  readonly revokedAt!: string | null;
  @ApiProperty({
    description: 'by the database clock: not revoked, not idle too long, not expired, its key not revoked',
  })
  readonly live!: boolean;
}

export class ConsoleSessionPageDto extends ListOf(ConsoleSessionDto, {
  description: 'oldest first',
  cursor: 'nextAfter',
}) {}

/** The caller's own session, as a signed-in console sees it. */
export class CurrentSessionDto {
  @ApiProperty(UUID_V7_PROP)
  readonly id!: string;
  @ApiProperty({ enum: API_KEY_ROLES, description: "the API key's role: viewers read, admins also change" })
  readonly role!: ApiKeyRole;
  @ApiProperty({ description: "the API key's name" })
  readonly keyName!: string;
  @ApiProperty({
    description:
      'send it as `X-CSRF-Token` with every change made with this session (POST, PUT, PATCH, DELETE); keep it in memory, not storage',
  })
  readonly csrfToken!: string;
  @ApiProperty({ type: 'integer' })
  readonly idleTimeoutMs!: number;
  @ApiProperty(TIME_PROP)
  readonly expiresAt!: string;
}
