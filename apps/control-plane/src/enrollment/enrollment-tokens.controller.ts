import { Body, Controller, Delete, Get, HttpCode, Param, Post, Query, Req } from '@nestjs/common';
import { ApiCreatedResponse, ApiOkResponse, ApiOperation, ApiParam } from '@nestjs/swagger';
import { UUID_V7_PATTERN } from '@ql/domain';
import { AdminController, LimitQuery, TextQuery } from '../http/admin-docs';
import { AdminErrorResponses } from '../http/error-responses';
import { AdminRequest, RequireRole } from '../identity/api-key.guard';
import {
  CreateEnrollmentTokenDto,
  CreatedEnrollmentTokenDto,
  EnrollmentTokenDto,
  EnrollmentTokenPageDto,
} from './dto/enrollment-token.dto';
import { EnrollmentTokensService } from './enrollment-tokens.service';

const uuidV7 = { type: 'string', pattern: UUID_V7_PATTERN.source } as const;

/** Admin listener: enrollment tokens (ADR 0045 §1). Viewers list; admins create and revoke. */
@Controller('api/v1/enrollment-tokens')
@AdminController()
export class EnrollmentTokensController {
  constructor(private readonly tokens: EnrollmentTokensService) {}

  @Post()
  @HttpCode(201)
  @RequireRole('admin')
  @ApiOperation({
    summary:
      'Create an enrollment token for one worker id, or for a pattern with a count; the token is returned once, only its SHA-256 is stored (admin)',
  })
  @ApiCreatedResponse({ type: CreatedEnrollmentTokenDto })
  @AdminErrorResponses({ 400: 'the body breaks a rule; nothing was written' })
  create(@Req() req: AdminRequest, @Body() body: CreateEnrollmentTokenDto) {
    return this.tokens.create(req.apiKey!, body);
  }

  @Get()
  @ApiOperation({
    summary:
      'List enrollment tokens (keyset pagination on id): what each enrolls, its uses and status; never the token or its digest',
  })
  @TextQuery('after', 'token id to continue after (nextAfter)', uuidV7)
  @LimitQuery()
  @ApiOkResponse({ type: EnrollmentTokenPageDto })
  @AdminErrorResponses({ 400: 'a cursor or limit is malformed; `detail` names it' })
  list(@Query() query: unknown) {
    return this.tokens.list(query);
  }

  @Delete(':id')
  @RequireRole('admin')
  @ApiOperation({
    summary:
      'Revoke an enrollment token: it enrolls no worker from this commit on; workers it enrolled stay (admin)',
  })
  @ApiParam({ name: 'id', schema: uuidV7 })
  @ApiOkResponse({
    type: EnrollmentTokenDto,
    description: 'the token, revoked (the first time, if revoked before)',
  })
  @AdminErrorResponses({ 400: 'the id is not a token id', 404: 'no such token' })
  revoke(@Req() req: AdminRequest, @Param('id') id: string) {
    return this.tokens.revoke(req.apiKey!, id);
  }
}
