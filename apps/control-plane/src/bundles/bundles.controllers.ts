import { Controller, Delete, Get, HttpCode, Param, Post, Query, Req } from '@nestjs/common';
import { ApiBody, ApiConsumes, ApiOkResponse, ApiOperation, ApiParam, ApiQuery } from '@nestjs/swagger';
import { BUNDLE_DIGEST_PATTERN } from '@ql/domain';
import { AdminController, LimitQuery, TextQuery } from '../http/admin-docs';
import { AdminErrorResponses } from '../http/error-responses';
import { AdminRequest, RequireRole } from '../identity/api-key.guard';
import { BUNDLE_FILE_NAME_PATTERN, BundlesService } from './bundles.service';
import { BundleDto, BundlePageDto, DeletedBundleDto, PushedBundleDto } from './dto/bundle.dto';

/** The admin route of script bundles; the raw-body parser (bundle-uploads.ts) serves only this path. */
export const BUNDLES_ROUTE = 'api/v1/bundles';
/** The role an upload needs: checked at the edge before the body is read, and by the guard. */
export const BUNDLE_UPLOAD_ROLE = 'admin';

const DigestParam = () =>
  ApiParam({ name: 'digest', schema: { type: 'string', pattern: BUNDLE_DIGEST_PATTERN.source } });

@Controller(BUNDLES_ROUTE)
@AdminController()
export class BundlesController {
  constructor(private readonly bundles: BundlesService) {}

  @Post()
  @HttpCode(200)
  @RequireRole(BUNDLE_UPLOAD_ROLE)
  @ApiOperation({
    summary:
      'Push a script bundle: a .tar.gz (application/gzip) or one file (application/octet-stream with ?name=), at most QL_BUNDLE_MAX_BYTES; checked by the rules the worker unpacks with, stored by its SHA-256 (admin). The key and role are checked before the body is read; past QL_BUNDLE_UPLOADS_MAX uploads at once 503 `unavailable`, reason `bundle_uploads_busy`, with Retry-After',
  })
  @ApiQuery({
    name: 'name',
    required: false,
    schema: { type: 'string', pattern: BUNDLE_FILE_NAME_PATTERN.source },
    description: 'one file only: its name in the bundle',
  })
  @ApiConsumes('application/gzip', 'application/octet-stream')
  @ApiBody({ required: true, schema: { type: 'string', format: 'binary' } })
  @ApiOkResponse({ type: PushedBundleDto })
  @AdminErrorResponses({
    400: 'not a bundle, or it breaks an unpack rule (`bundle: <rule>`: absolute_path, parent_segment, link_out, through_link, unsupported_entry, duplicate_path, too_many_files, too_big, not_gzip, truncated, bad_header, bad_path); nothing was stored',
    413: 'the body is over QL_BUNDLE_MAX_BYTES',
  })
  push(@Req() req: AdminRequest, @Query() query: unknown) {
    const mediaType = (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
    return this.bundles.push(req.apiKey!, req.body, mediaType, query);
  }

  @Get()
  @ApiOperation({ summary: 'List bundles (keyset pagination on digest)' })
  @TextQuery('after', 'digest to continue after (nextAfter)')
  @LimitQuery()
  @ApiOkResponse({ type: BundlePageDto })
  list(@Query() query: unknown) {
    return this.bundles.list(query);
  }

  @Get(':digest')
  @ApiOperation({ summary: 'One bundle: size, entries, who pushed it' })
  @DigestParam()
  @ApiOkResponse({ type: BundleDto })
  @AdminErrorResponses({ 404: 'no such bundle' })
  get(@Param('digest') digest: string) {
    return this.bundles.get(digest);
  }

  @Delete(':digest')
  @RequireRole('admin')
  @ApiOperation({
    summary:
      'Delete a bundle no live task and no unfinished run pins (admin); refused with 409 `conflict`, reason `bundle_pinned`, otherwise',
  })
  @DigestParam()
  @ApiOkResponse({ type: DeletedBundleDto })
  @AdminErrorResponses({
    404: 'no such bundle',
    409: '`bundle_pinned`: a live task or an unfinished run pins it; nothing was written',
  })
  delete(@Req() req: AdminRequest, @Param('digest') digest: string) {
    return this.bundles.delete(req.apiKey!, digest);
  }
}
