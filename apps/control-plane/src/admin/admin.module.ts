import { Module } from '@nestjs/common';
import {
  ApiKeysController,
  AuditController,
  CertificatesController,
  OpenApiController,
  WorkersController,
} from './admin.controllers';
import { AdminService } from './admin.service';
import { OpenApiDocument } from './openapi-document';

/**
 * Administration on the admin listener: worker views, drain/disable, API keys, certificate
 * revocation, the audit log and the OpenAPI document (R-ADM-1..2). Every mutation is audited.
 */
@Module({
  controllers: [
    WorkersController,
    ApiKeysController,
    AuditController,
    CertificatesController,
    OpenApiController,
  ],
  providers: [AdminService, OpenApiDocument],
})
export class AdminModule {}
