import { Body, Controller, Delete, Get, HttpCode, Param, Post, Put, Query, Req } from '@nestjs/common';
import { ApiCreatedResponse, ApiOkResponse, ApiOperation, ApiParam } from '@nestjs/swagger';
import { SECRET_LIMITS, SECRET_NAME_PATTERN } from '@ql/domain';
import { AdminController, LimitQuery, TextQuery } from '../http/admin-docs';
import { AdminErrorResponses } from '../http/error-responses';
import { AdminRequest, RequireRole } from '../identity/api-key.guard';
import {
  CreateSecretDto,
  ReplaceSecretDto,
  SecretDto,
  SecretPageDto,
  SecretWrittenDto,
} from './dto/secret.dto';
import { SecretsService } from './secrets.service';

const name = {
  type: 'string',
  pattern: SECRET_NAME_PATTERN.source,
  maxLength: SECRET_LIMITS.nameLength,
} as const;
const DISABLED = 'secrets are disabled: QL_SECRETS_KEY is not set';

/** Admin listener: secrets (ADR 0050). Viewers list metadata; admins create, replace and delete. */
@Controller('api/v1/secrets')
@AdminController()
export class SecretsController {
  constructor(private readonly secrets: SecretsService) {}

  @Post()
  @HttpCode(201)
  @RequireRole('admin')
  @ApiOperation({
    summary: `Create a secret; its value is encrypted at rest and never answered, logged or audited; 503 when ${DISABLED} (admin)`,
  })
  @ApiCreatedResponse({ type: SecretWrittenDto })
  @AdminErrorResponses({
    400: 'the body breaks a rule; nothing was written',
    409: 'a secret has this name (`reason` secret_exists)',
  })
  create(@Req() req: AdminRequest, @Body() body: CreateSecretDto) {
    return this.secrets.put(req.apiKey!, body.name, body.value, 'create');
  }

  @Put(':name')
  @RequireRole('admin')
  @ApiOperation({
    summary: `Replace a secret’s value; attempts that fetch it from now on get the new one; 503 when ${DISABLED} (admin)`,
  })
  @ApiParam({ name: 'name', schema: name })
  @ApiOkResponse({ type: SecretWrittenDto })
  @AdminErrorResponses({ 400: 'the name or body breaks a rule', 404: 'no such secret' })
  replace(@Req() req: AdminRequest, @Param('name') secret: string, @Body() body: ReplaceSecretDto) {
    return this.secrets.put(req.apiKey!, secret, body.value, 'replace');
  }

  @Get()
  @ApiOperation({
    summary: 'List secrets by name: name, key id, times and the tasks that map each; never a value',
  })
  @TextQuery('after', 'secret name to continue after (nextAfter)', name)
  @LimitQuery()
  @ApiOkResponse({ type: SecretPageDto })
  @AdminErrorResponses({ 400: 'a cursor or limit is malformed; `detail` names it' })
  list(@Query() query: unknown) {
    return this.secrets.list(query);
  }

  @Get(':name')
  @ApiOperation({ summary: 'One secret’s metadata; never its value' })
  @ApiParam({ name: 'name', schema: name })
  @ApiOkResponse({ type: SecretDto })
  @AdminErrorResponses({ 400: 'the name breaks a rule', 404: 'no such secret' })
  get(@Param('name') secret: string) {
    return this.secrets.get(secret);
  }

  @Delete(':name')
  @RequireRole('admin')
  @ApiOperation({
    summary: 'Delete a secret; refused while a live task’s current revision maps it (admin)',
  })
  @ApiParam({ name: 'name', schema: name })
  @ApiOkResponse({ type: SecretDto, description: 'the secret as it was, with `deleted: true`' })
  @AdminErrorResponses({
    400: 'the name breaks a rule',
    404: 'no such secret',
    409: 'a task maps it (`reason` secret_in_use; the detail names the tasks)',
  })
  delete(@Req() req: AdminRequest, @Param('name') secret: string) {
    return this.secrets.delete(req.apiKey!, secret);
  }
}
