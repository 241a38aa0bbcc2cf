import { ApiProperty } from '@nestjs/swagger';
import {
  ENV_IMPORT_MAX_BYTES,
  ENV_VAR_LIMITS,
  ENV_VAR_NAME_PATTERN,
  ENV_VAR_REMARK_RULES,
  SECRET_LIMITS,
} from '@ql/domain';
import { BoolField, TextField, TextListField } from '../../http/validation/dto-fields';
import { ListOf, TIME_PROP, integerProp } from '../../http/view-props';

const NAME_RULES = { max: ENV_VAR_LIMITS.nameLength, pattern: ENV_VAR_NAME_PATTERN } as const;
const VALUE_DOC = `a plain value follows a task's \`env\` rule (at most ${ENV_VAR_LIMITS.plainValueLength} characters, no control character or line break; \`&\` joins several); a secret one the secret rule (at most ${SECRET_LIMITS.valueBytes / 1024} KiB of UTF-8, any character but NUL: a list joined by \`&\` or line feeds is kept as typed), encrypted at rest and never answered`;
const valueField = (presence: 'required' | 'optional') =>
  TextField({ max: SECRET_LIMITS.valueBytes, min: 0, output: true }, { presence, description: VALUE_DOC });
const remarkField = () =>
  TextField(ENV_VAR_REMARK_RULES, {
    presence: 'optional',
    description: `any printable Unicode (NFC), at most ${ENV_VAR_LIMITS.remarkLength} characters and ${ENV_VAR_LIMITS.remarkBytes} bytes; may be empty`,
  });

/** `POST /api/v1/env-vars` (ADR 0061): a new global variable, at the end of the order. */
export class CreateEnvVarDto {
  @TextField(NAME_RULES, { description: 'a shell variable name: a letter or `_`, then letters, digits, `_`' })
  name!: string;

  @valueField('required')
  value!: string;

  @BoolField({
    presence: 'optional',
    default: false,
    description: 'a secret: stored as the secret `env.<name>` (ADR 0050); cannot change later',
  })
  secret?: boolean;

  @remarkField()
  remark?: string;

  @BoolField({ presence: 'optional', default: true, description: 'enabled variables go into every run' })
  enabled?: boolean;
}

/** `PATCH /api/v1/env-vars/{name}`: any of value, remark, enabled (at least one). */
export class ChangeEnvVarDto {
  @valueField('optional')
  value?: string;

  @remarkField()
  remark?: string;

  @BoolField({ presence: 'optional' })
  enabled?: boolean;

  @BoolField({
    presence: 'optional',
    description:
      'never accepted (400 `immutable`): a variable stays secret or plain; delete it and create it again',
  })
  secret?: boolean;
}

/** `PUT /api/v1/env-vars/order`. */
export class EnvVarOrderDto {
  @TextListField(
    { ...NAME_RULES, maxItems: ENV_VAR_LIMITS.total, unique: true },
    { description: 'every variable’s name once, in the new order' },
  )
  names!: string[];
}

/** A variable as admins see it: a secret one's value never. */
export class EnvVarDto {
  @ApiProperty({ pattern: ENV_VAR_NAME_PATTERN.source })
  readonly name!: string;

  @ApiProperty()
  readonly secret!: boolean;

  @ApiProperty({
    type: 'string',
    nullable: true,
    description: 'the value of a plain variable; null for a secret',
  })
  readonly value!: string | null;

  @ApiProperty()
  readonly remark!: string;

  @ApiProperty()
  readonly enabled!: boolean;

  @ApiProperty(integerProp('the order runs receive the variables in, from 1'))
  readonly position!: number;

  @ApiProperty(integerProp('1, then one more each time the value changes'))
  readonly version!: number;

  @ApiProperty(TIME_PROP)
  readonly createdAt!: string;

  @ApiProperty(TIME_PROP)
  readonly updatedAt!: string;
}

export class EnvVarDeletedDto extends EnvVarDto {
  @ApiProperty({ enum: [true] })
  readonly deleted!: true;
}

export class EnvVarPageDto extends ListOf(EnvVarDto, {
  description: 'by position, then name',
  cursor: 'nextAfter',
}) {}

export class EnvVarListDto extends ListOf(EnvVarDto, { description: 'every variable, by position' }) {}

/** `POST /api/v1/env-vars/import`: a shell `export` file or QingLong's env JSON export, as text. */
export class ImportEnvVarsDto {
  @TextField(
    { max: ENV_IMPORT_MAX_BYTES, output: true },
    {
      description:
        'the file: `export NAME="value"` lines, or QingLong\'s env JSON export (`[{name, value, remarks, status}]`); rows of one name are joined by `&`',
    },
  )
  content!: string;

  @BoolField({
    presence: 'optional',
    default: false,
    description: 'make the changes; without it, only the report',
  })
  apply?: boolean;

  @TextListField(
    { ...NAME_RULES, maxItems: ENV_VAR_LIMITS.total, unique: true },
    { presence: 'optional', description: 'names imported as plain variables; every other one is a secret' },
  )
  plain?: string[];
}

class ImportSkipDto {
  @ApiProperty({ description: 'a name, `line N` or `item N`' })
  readonly at!: string;

  @ApiProperty()
  readonly reason!: string;
}

export class EnvImportReportDto {
  @ApiProperty({ description: 'true when the changes were made (`apply: true`)' })
  readonly applied!: boolean;

  @ApiProperty({ type: [String] })
  readonly create!: string[];

  @ApiProperty({ type: [String], description: 'a value, remark or enabled differs' })
  readonly update!: string[];

  @ApiProperty({ type: [String] })
  readonly unchanged!: string[];

  @ApiProperty({ type: () => [ImportSkipDto], description: 'names held by a variable of the other kind' })
  readonly refused!: ImportSkipDto[];

  @ApiProperty({ type: () => [ImportSkipDto], description: 'what could not be read, never imported' })
  readonly skipped!: ImportSkipDto[];
}
