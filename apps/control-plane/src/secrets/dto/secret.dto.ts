import { ApiProperty } from '@nestjs/swagger';
import { SECRET_LIMITS, SECRET_NAME_PATTERN, UUID_V7_PATTERN } from '@ql/domain';
import { TextField } from '../../http/validation/dto-fields';
import { ListOf, TIME_PROP } from '../../http/view-props';

const VALUE_DOC = `the value: at most ${SECRET_LIMITS.valueBytes / 1024} KiB of UTF-8, any character but NUL (line breaks and \`&\` are kept, a QingLong cookie list may be one secret); encrypted at rest, never answered, logged or audited`;
const valueField = () =>
  TextField({ max: SECRET_LIMITS.valueBytes, output: true }, { description: VALUE_DOC });

/** `POST /api/v1/secrets` (ADR 0050): a new secret. */
export class CreateSecretDto {
  @TextField(
    { max: SECRET_LIMITS.nameLength, pattern: SECRET_NAME_PATTERN },
    {
      description: 'letters, digits, `.`, `_`, `-` (never `&` or a line break: they join names in a mapping)',
    },
  )
  name!: string;

  @valueField()
  value!: string;
}

/** `PUT /api/v1/secrets/{name}`: a new value for an existing secret. */
export class ReplaceSecretDto {
  @valueField()
  value!: string;
}

/** A secret as admins see it: metadata only, never the value. */
export class SecretDto {
  @ApiProperty({ pattern: SECRET_NAME_PATTERN.source })
  readonly name!: string;

  @ApiProperty({ description: 'the id of the key its value is encrypted under (QL_SECRETS_KEY_ID)' })
  readonly keyId!: string;

  @ApiProperty(TIME_PROP)
  readonly createdAt!: string;

  @ApiProperty(TIME_PROP)
  readonly updatedAt!: string;

  @ApiProperty({
    type: 'string',
    isArray: true,
    pattern: UUID_V7_PATTERN.source,
    description:
      'live tasks whose current revision maps it (at most 100); while any does, it cannot be deleted',
  })
  readonly usedBy!: string[];
}

export class SecretWrittenDto extends SecretDto {
  @ApiProperty({ description: 'true when this call created it' })
  readonly created!: boolean;
}

export class SecretPageDto extends ListOf(SecretDto, { description: 'by name', cursor: 'nextAfter' }) {}
