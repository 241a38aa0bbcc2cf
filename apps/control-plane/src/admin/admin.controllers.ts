import { Body, Controller, Delete, Get, HttpCode, Param, Post, Query, Req } from '@nestjs/common';
import { ApiCreatedResponse, ApiOkResponse, ApiOperation, ApiParam, ApiTags } from '@nestjs/swagger';
import { WORKER_ID_PATTERN, WORKER_STATUSES } from '@ql/domain';
import { AdminController, LimitQuery, PROBES_TAG, TextQuery } from '../http/admin-docs';
import { AdminErrorResponses } from '../http/error-responses';
import { AdminRequest, RequireRole } from '../identity/api-key.guard';
import { AdminService } from './admin.service';
import { CreateApiKeyDto, RevokeCertificateDto } from './dto/admin-bodies.dto';
import {
  ApiKeyDto,
  ApiKeyListDto,
  AuditListDto,
  CreatedApiKeyDto,
  RevokedCertificateDto,
  RevokedCertificateListDto,
  RevokedWorkerDto,
  DeletedWorkerDto,
  WorkerDetailDto,
  WorkerDto,
  WorkerPageDto,
} from './dto/admin-views.dto';
import { OpenApiDocument } from './openapi-document';

const WorkerIdParam = () =>
  ApiParam({ name: 'workerId', schema: { type: 'string', pattern: WORKER_ID_PATTERN.source } });

@Controller('api/v1/workers')
@AdminController()
export class WorkersController {
  constructor(private readonly admin: AdminService) {}

  @Get()
  @ApiOperation({ summary: 'List workers (keyset pagination on worker id); filters combine with AND' })
  @TextQuery('status', 'only workers in this effective status (the `status` each item shows)', {
    type: 'string',
    enum: WORKER_STATUSES,
  })
  @TextQuery('label', 'only workers with this label, `key=value` (exact; the value may be empty)')
  @TextQuery('capabilitiesDigest', 'only workers whose capabilities have this digest', {
    type: 'string',
    pattern: '^[0-9a-f]{64}$',
  })
  @TextQuery('after', 'worker id to continue after (nextAfter)')
  @LimitQuery()
  @ApiOkResponse({ type: WorkerPageDto })
  @AdminErrorResponses({ 400: 'a filter or cursor is malformed; `field` names it' })
  list(@Query() query: unknown) {
    return this.admin.listWorkers(query);
  }

  @Get(':workerId')
  @ApiOperation({
    summary: 'Worker detail: session, generation, version, lease expiry, capabilities, active runs',
  })
  @WorkerIdParam()
  @ApiOkResponse({ type: WorkerDetailDto })
  @AdminErrorResponses({ 404: 'no such worker' })
  get(@Param('workerId') workerId: string) {
    return this.admin.getWorker(workerId);
  }

  @Post(':workerId/drain')
  @HttpCode(200)
  @RequireRole('admin')
  @ApiOperation({
    summary:
      'Drain a worker: its live session goes to draining (capacity 0, no new leases) and its next heartbeat answer says so; its runs go on (admin)',
  })
  @WorkerIdParam()
  @ApiOkResponse({ type: WorkerDto })
  @AdminErrorResponses({
    404: 'no such worker',
    409: '`worker_not_online`: it is expired, offline or disabled (the message names the next step); nothing was written',
  })
  drain(@Req() req: AdminRequest, @Param('workerId') workerId: string) {
    return this.admin.drain(req.apiKey!, workerId);
  }

  @Post(':workerId/resume')
  @HttpCode(200)
  @RequireRole('admin')
  @ApiOperation({
    summary:
      'Undo a drain: its live session goes back to online with its full capacity; its next heartbeat answer says so and it pulls again (admin)',
  })
  @WorkerIdParam()
  @ApiOkResponse({ type: WorkerDto })
  @AdminErrorResponses({
    404: 'no such worker',
    409: '`worker_not_draining`: it is expired, offline or disabled (the message names the next step); nothing was written',
  })
  resume(@Req() req: AdminRequest, @Param('workerId') workerId: string) {
    return this.admin.resume(req.apiKey!, workerId);
  }

  @Delete(':workerId')
  @RequireRole('admin')
  @ApiOperation({
    summary:
      'Delete a worker without a live session (expired, offline or disabled) holding no active lease; its runs, attempts, leases and sessions stay readable (admin)',
  })
  @WorkerIdParam()
  @ApiOkResponse({ type: DeletedWorkerDto })
  @AdminErrorResponses({
    404: 'no such worker',
    409: '`worker_not_offline` (online or draining: stop its process or disable it first) or `worker_holds_leases`; nothing was written',
  })
  delete(@Req() req: AdminRequest, @Param('workerId') workerId: string) {
    return this.admin.deleteWorker(req.apiKey!, workerId);
  }

  @Post(':workerId/disable')
  @HttpCode(200)
  @RequireRole('admin')
  @ApiOperation({
    summary:
      'Disable a worker: fences its session now; every replica refuses it from the same commit, and the worker process exits with code 5 and is not restarted (admin)',
  })
  @WorkerIdParam()
  @ApiOkResponse({ type: WorkerDto })
  @AdminErrorResponses({ 404: 'no such worker' })
  disable(@Req() req: AdminRequest, @Param('workerId') workerId: string) {
    return this.admin.setDisabled(req.apiKey!, workerId, true);
  }

  @Post(':workerId/revoke')
  @HttpCode(200)
  @RequireRole('admin')
  @ApiOperation({
    summary:
      'Revoke every certificate issued to the worker by enrollment and renewal: every replica refuses them within QL_REVOCATION_CACHE_MS, and none renews; the machine enrolls again with a new token (admin)',
  })
  @WorkerIdParam()
  @ApiOkResponse({ type: RevokedWorkerDto })
  @AdminErrorResponses({})
  revoke(@Req() req: AdminRequest, @Param('workerId') workerId: string) {
    return this.admin.revokeWorker(req.apiKey!, workerId);
  }

  @Post(':workerId/enable')
  @HttpCode(200)
  @RequireRole('admin')
  @ApiOperation({
    summary:
      'Allow a disabled worker to register again: it stays offline until its process is started again (admin)',
  })
  @WorkerIdParam()
  @ApiOkResponse({ type: WorkerDto })
  @AdminErrorResponses({
    404: 'no such worker',
    409: '`worker_not_disabled` (a draining worker wants `resume`; the message names the next step); nothing was written',
  })
  enable(@Req() req: AdminRequest, @Param('workerId') workerId: string) {
    return this.admin.setDisabled(req.apiKey!, workerId, false);
  }
}

@Controller('api/v1/api-keys')
@RequireRole('admin')
@AdminController()
export class ApiKeysController {
  constructor(private readonly admin: AdminService) {}

  @Get()
  @ApiOperation({ summary: 'List API keys (never the keys themselves) (admin)' })
  @ApiOkResponse({ type: ApiKeyListDto })
  list() {
    return this.admin.listApiKeys();
  }

  @Post()
  @HttpCode(201)
  @ApiOperation({ summary: 'Create an API key; the token is returned once (admin)' })
  @ApiCreatedResponse({ type: CreatedApiKeyDto })
  @AdminErrorResponses({ 400: 'the body breaks a rule; nothing was written' })
  create(@Req() req: AdminRequest, @Body() body: CreateApiKeyDto) {
    return this.admin.createApiKey(req.apiKey!, body);
  }

  @Post(':id/revoke')
  @HttpCode(200)
  @ApiOperation({ summary: 'Revoke an API key (admin)' })
  @ApiParam({ name: 'id', schema: { type: 'string', format: 'uuid' } })
  @ApiOkResponse({ type: ApiKeyDto })
  revoke(@Req() req: AdminRequest, @Param('id') id: string) {
    return this.admin.revokeApiKey(req.apiKey!, id);
  }
}

@Controller('api/v1/certificates')
@RequireRole('admin')
@AdminController()
export class CertificatesController {
  constructor(private readonly admin: AdminService) {}

  @Post('revoke')
  @HttpCode(200)
  @ApiOperation({
    summary:
      'Revoke a worker certificate by SHA-256 fingerprint; every replica refuses it within QL_REVOCATION_CACHE_MS (admin)',
  })
  @ApiOkResponse({
    type: RevokedCertificateDto,
    description: 'the revocation (the first one, if revoked before)',
  })
  @AdminErrorResponses({ 400: 'the body breaks a rule; nothing was written' })
  revoke(@Req() req: AdminRequest, @Body() body: RevokeCertificateDto) {
    return this.admin.revokeCertificate(req.apiKey!, body);
  }

  @Get('revoked')
  @ApiOperation({ summary: 'Revoked certificates, newest first (admin)' })
  @LimitQuery()
  @ApiOkResponse({ type: RevokedCertificateListDto })
  list(@Query() query: unknown) {
    return this.admin.listRevokedCertificates(query);
  }
}

@Controller('api/v1/audit')
@RequireRole('admin')
@AdminController()
export class AuditController {
  constructor(private readonly admin: AdminService) {}

  @Get()
  @ApiOperation({ summary: 'Recent admin mutations: who, what, when (admin)' })
  @LimitQuery()
  @ApiOkResponse({ type: AuditListDto })
  list(@Query() query: unknown) {
    return this.admin.listAudit(query);
  }
}

@Controller()
@ApiTags(PROBES_TAG)
export class OpenApiController {
  constructor(private readonly openApi: OpenApiDocument) {}

  @Get('openapi.json')
  @RequireRole('public')
  @ApiOperation({ summary: 'This document: the admin API and the worker ingress (OpenAPI 3.1)' })
  @ApiOkResponse({ description: 'OpenAPI 3.1', schema: { type: 'object' } })
  document() {
    return this.openApi.get();
  }
}
