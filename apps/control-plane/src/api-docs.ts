import { INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter, NestFastifyApplication } from '@nestjs/platform-fastify';
import { OpenAPIObject, SwaggerModule } from '@nestjs/swagger';
import { OpenApiDocument, SWAGGER_UI_PATH, buildOpenApiDocument } from './admin/openapi-document';
import { AdminAppModule, IngressAppModule } from './app.modules';
import { ControlPlaneConfig } from './config/config';
import { ControlPlaneCore } from './core/core';

export { SWAGGER_UI_PATH };

/**
 * Hands `/openapi.json` the builder of the document (both listeners' applications; built on the first
 * request for it, ADR 0020) and serves Swagger UI on the admin listener, from the same document.
 * Swagger UI's routes are Fastify routes outside Nest's pipeline: no API key guard, and 404s still go
 * through the admin filter.
 */
export function serveApiDocs(admin: NestFastifyApplication, ingress: INestApplication): void {
  const document = admin.get(OpenApiDocument);
  document.buildWith(() => buildOpenApiDocument(admin, ingress));
  SwaggerModule.setup(SWAGGER_UI_PATH, admin, () => document.get(), {
    raw: false,
    customSiteTitle: 'QingLong control plane API',
  });
}

/**
 * The same document with no database and no listener (`npm run openapi`): both module graphs are
 * built in preview mode, where Nest instantiates nothing, so the core is never used.
 */
export async function offlineOpenApiDocument(config: ControlPlaneConfig): Promise<OpenAPIObject> {
  const core = { config, repositories: {} } as ControlPlaneCore;
  const options = { preview: true, logger: false, abortOnError: false } as const;
  const admin = await NestFactory.create(AdminAppModule.forCore(core), new FastifyAdapter(), options);
  const ingress = await NestFactory.create(IngressAppModule.forCore(core), new FastifyAdapter(), options);
  return buildOpenApiDocument(admin, ingress);
}
