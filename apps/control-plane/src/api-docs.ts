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
 * Builds the document from both listeners' applications before they listen, hands it to
 * `/openapi.json` and serves Swagger UI on the admin listener. Swagger UI's routes are Fastify
 * routes outside Nest's pipeline: no API key guard, and 404s still go through the admin filter.
 */
export function serveApiDocs(admin: NestFastifyApplication, ingress: INestApplication): void {
  const document = buildOpenApiDocument(admin, ingress);
  admin.get(OpenApiDocument).set(document);
  SwaggerModule.setup(SWAGGER_UI_PATH, admin, document, {
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
