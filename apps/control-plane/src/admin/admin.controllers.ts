import { Body, Controller, Get, HttpCode, Param, Post, Query, Req } from '@nestjs/common';
import { AdminRequest, RequireRole } from '../identity/api-key.guard';
import { AdminService } from './admin.service';
import { OPENAPI_DOCUMENT } from './openapi';

@Controller('api/v1/workers')
export class WorkersController {
  constructor(private readonly admin: AdminService) {}

  @Get()
  list(@Query() query: unknown) {
    return this.admin.listWorkers(query);
  }

  @Get(':workerId')
  get(@Param('workerId') workerId: string) {
    return this.admin.getWorker(workerId);
  }

  @Post(':workerId/disable')
  @HttpCode(200)
  @RequireRole('admin')
  disable(@Req() req: AdminRequest, @Param('workerId') workerId: string) {
    return this.admin.setDisabled(req.apiKey!, workerId, true);
  }

  @Post(':workerId/enable')
  @HttpCode(200)
  @RequireRole('admin')
  enable(@Req() req: AdminRequest, @Param('workerId') workerId: string) {
    return this.admin.setDisabled(req.apiKey!, workerId, false);
  }
}

@Controller('api/v1/api-keys')
@RequireRole('admin')
export class ApiKeysController {
  constructor(private readonly admin: AdminService) {}

  @Get()
  list() {
    return this.admin.listApiKeys();
  }

  @Post()
  @HttpCode(201)
  create(@Req() req: AdminRequest, @Body() body: unknown) {
    return this.admin.createApiKey(req.apiKey!, body);
  }

  @Post(':id/revoke')
  @HttpCode(200)
  revoke(@Req() req: AdminRequest, @Param('id') id: string) {
    return this.admin.revokeApiKey(req.apiKey!, id);
  }
}

@Controller('api/v1/certificates')
@RequireRole('admin')
export class CertificatesController {
  constructor(private readonly admin: AdminService) {}

  @Post('revoke')
  @HttpCode(200)
  revoke(@Req() req: AdminRequest, @Body() body: unknown) {
    return this.admin.revokeCertificate(req.apiKey!, body);
  }

  @Get('revoked')
  list(@Query() query: unknown) {
    return this.admin.listRevokedCertificates(query);
  }
}

@Controller('api/v1/audit')
@RequireRole('admin')
export class AuditController {
  constructor(private readonly admin: AdminService) {}

  @Get()
  list(@Query() query: unknown) {
    return this.admin.listAudit(query);
  }
}

@Controller()
export class OpenApiController {
  @Get('openapi.json')
  @RequireRole('public')
  document() {
    return OPENAPI_DOCUMENT;
  }
}
