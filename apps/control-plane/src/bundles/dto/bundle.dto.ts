import { ApiProperty } from '@nestjs/swagger';
import {
  BUNDLE_DIGEST_PATTERN,
  BUNDLE_WORKDIR_MAX_LENGTH,
  BUNDLE_WORKDIR_PATTERN,
  TaskBundle,
} from '@ql/domain';
import { BundleRequest } from '@ql/contracts';
import { TextField } from '../../http/validation/dto-fields';
import { ListOf, TIME_PROP } from '../../http/view-props';
import { LeaseFenceDto } from '../../leases/dto/pull.dto';

/** `bundle` of a task body (issue 19 item 2): the pinned digest and the folder inside it. */
export class TaskBundleDto implements TaskBundle {
  @TextField(
    { max: 64, pattern: BUNDLE_DIGEST_PATTERN },
    { description: 'SHA-256 (hex) of a pushed bundle (`GET /api/v1/bundles`); an unknown one is refused' },
  )
  digest!: string;

  @TextField(
    { max: BUNDLE_WORKDIR_MAX_LENGTH, pattern: BUNDLE_WORKDIR_PATTERN },
    {
      presence: 'optional',
      default: '.',
      description: 'the folder inside the bundle the command runs in (relative, no `..`); `.` is its root',
      example: 'scripts',
    },
  )
  workdir!: string;
}

/** A stored bundle, without its bytes. */
export class BundleDto {
  @ApiProperty({ pattern: BUNDLE_DIGEST_PATTERN.source, description: 'SHA-256 (hex) of the stored .tar.gz' })
  readonly digest!: string;

  @ApiProperty({ type: 'integer', description: 'bytes of the stored .tar.gz' })
  readonly sizeBytes!: number;

  @ApiProperty({ type: 'integer', description: 'entries (files, folders, links) in the archive' })
  readonly files!: number;

  @ApiProperty({ type: 'integer', description: 'bytes of file content once unpacked' })
  readonly unpackedBytes!: number;

  @ApiProperty({ description: 'id of the API key that pushed it first' })
  readonly createdBy!: string;

  @ApiProperty(TIME_PROP)
  readonly createdAt!: string;
}

export class PushedBundleDto extends BundleDto {
  @ApiProperty({ description: 'false: a bundle with these bytes was stored before; nothing was written' })
  readonly created!: boolean;
}

export class DeletedBundleDto extends BundleDto {
  @ApiProperty({ enum: [true] })
  readonly deleted!: true;
}

export class BundlePageDto extends ListOf(BundleDto, { cursor: 'nextAfter' }) {}

/** The worker's fetch (ingress `bundle`): the lease fence and the digest its offer pins. */
export class BundleFetchDto extends LeaseFenceDto implements BundleRequest {
  @TextField(
    { max: 64, pattern: BUNDLE_DIGEST_PATTERN },
    { description: "the digest the attempt's revision pins" },
  )
  digest!: string;
}
