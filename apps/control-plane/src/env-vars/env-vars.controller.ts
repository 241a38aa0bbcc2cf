import { Body, Controller, Delete, Get, HttpCode, Param, Patch, Post, Put, Query, Req } from '@nestjs/common';
import { ApiCreatedResponse, ApiOkResponse, ApiOperation, ApiParam } from '@nestjs/swagger';
import { ENV_VAR_LIMITS, ENV_VAR_NAME_PATTERN } from '@ql/domain';
import { AdminController, LimitQuery, TextQuery } from '../http/admin-docs';
import { AdminErrorResponses } from '../http/error-responses';
import { AdminRequest, RequireRole } from '../identity/api-key.guard';
import {
  ChangeEnvVarDto,
  CreateEnvVarDto,
  EnvImportReportDto,
  EnvVarDeletedDto,
  ImportEnvVarsDto,
  EnvVarDto,
  EnvVarListDto,
  EnvVarOrderDto,
  EnvVarPageDto,
} from './dto/env-var.dto';
import { EnvVarsService } from './env-vars.service';

const name = {
  type: 'string',
  pattern: ENV_VAR_NAME_PATTERN.source,
  maxLength: ENV_VAR_LIMITS.nameLength,
} as const;
const LIMITS = `at most ${ENV_VAR_LIMITS.enabledPlain} plain variables (${ENV_VAR_LIMITS.enabledPlainBytes / 1024} KiB) and ${ENV_VAR_LIMITS.enabledSecret} secret ones enabled, ${ENV_VAR_LIMITS.total} in all`;

/**
 * Admin listener: global environment variables (issue 31 item 2, ADR 0061). Viewers read; admins
 * write. A secret variable's value is never answered.
 */
@Controller('api/v1/env-vars')
@AdminController()
export class EnvVarsController {
  constructor(private readonly vars: EnvVarsService) {}

  @Post()
  @HttpCode(201)
  @RequireRole('admin')
  @ApiOperation({
    summary:
      'Create a global env var, last in the order; a secret one is stored encrypted (503 without QL_SECRETS_KEY) (admin)',
  })
  @ApiCreatedResponse({ type: EnvVarDto })
  @AdminErrorResponses({
    400: 'the body breaks a rule; nothing was written',
    409: `a variable has this name (\`reason\` env_var_exists), a secret \`env.<name>\` made earlier exists (secret_exists), or it would pass a limit (env_vars_limit: ${LIMITS})`,
  })
  create(@Req() req: AdminRequest, @Body() body: CreateEnvVarDto) {
    return this.vars.create(req.apiKey!, body);
  }

  @Patch(':name')
  @RequireRole('admin')
  @ApiOperation({
    summary:
      'Change a variable’s value, remark or enabled; its version grows when the value changes; `secret` cannot change (admin)',
  })
  @ApiParam({ name: 'name', schema: name })
  @ApiOkResponse({ type: EnvVarDto })
  @AdminErrorResponses({
    400: 'the name or body breaks a rule (`secret` given: immutable; no field: empty_change)',
    404: 'no such variable',
    409: `it would pass a limit (env_vars_limit: ${LIMITS})`,
  })
  update(@Req() req: AdminRequest, @Param('name') key: string, @Body() body: ChangeEnvVarDto) {
    return this.vars.update(req.apiKey!, key, body);
  }

  @Post('import')
  @HttpCode(200)
  @RequireRole('admin')
  @ApiOperation({
    summary:
      'Import env vars from an `export A="…"` file or QingLong’s env JSON export: the report only, unless `apply: true`; importing twice changes nothing (admin)',
  })
  @ApiOkResponse({ type: EnvImportReportDto })
  @AdminErrorResponses({
    400: 'the body breaks a rule, or the file is not readable JSON; nothing was written',
    409: `it would pass a limit (env_vars_limit: ${LIMITS}); nothing was written`,
  })
  import(@Req() req: AdminRequest, @Body() body: ImportEnvVarsDto) {
    return this.vars.import(req.apiKey!, body);
  }

  @Put('order')
  @RequireRole('admin')
  @ApiOperation({ summary: 'Put every variable in a new order: each name once (admin)' })
  @ApiOkResponse({ type: EnvVarListDto })
  @AdminErrorResponses({
    400: 'the body breaks a rule',
    409: 'a name is unknown or left out (`reason` order_mismatch, the detail names it)',
  })
  reorder(@Req() req: AdminRequest, @Body() body: EnvVarOrderDto) {
    return this.vars.reorder(req.apiKey!, body);
  }

  @Get()
  @ApiOperation({ summary: 'List global env vars by position; a secret one’s value is never answered' })
  @TextQuery('after', 'variable name to continue after (nextAfter)', name)
  @LimitQuery()
  @ApiOkResponse({ type: EnvVarPageDto })
  @AdminErrorResponses({ 400: 'a cursor or limit is malformed or names no variable; `detail` names it' })
  list(@Query() query: unknown) {
    return this.vars.list(query);
  }

  @Get(':name')
  @ApiOperation({ summary: 'One global env var; a secret one’s value is never answered' })
  @ApiParam({ name: 'name', schema: name })
  @ApiOkResponse({ type: EnvVarDto })
  @AdminErrorResponses({ 400: 'the name breaks a rule', 404: 'no such variable' })
  get(@Param('name') key: string) {
    return this.vars.get(key);
  }

  @Delete(':name')
  @RequireRole('admin')
  @ApiOperation({
    summary:
      'Delete a global env var (a secret one with its secret; refused while a task maps that secret) (admin)',
  })
  @ApiParam({ name: 'name', schema: name })
  @ApiOkResponse({ type: EnvVarDeletedDto, description: 'the variable as it was, with `deleted: true`' })
  @AdminErrorResponses({
    400: 'the name breaks a rule',
    404: 'no such variable',
    409: 'a task’s current revision maps its secret `env.<name>` (`reason` secret_in_use)',
  })
  delete(@Req() req: AdminRequest, @Param('name') key: string) {
    return this.vars.delete(req.apiKey!, key);
  }
}
