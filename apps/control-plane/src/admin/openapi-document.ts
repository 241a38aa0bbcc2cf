import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { INestApplication, Injectable } from '@nestjs/common';
import { DocumentBuilder, OpenAPIObject, SecuritySchemeObject, SwaggerModule } from '@nestjs/swagger';
import { UnavailableError } from '@ql/domain';
import { INGRESS_PREFIX } from '@ql/contracts';
import { loadConfig } from '../config/config';
import { ADMIN_SECURITY, ADMIN_TAG, CONSOLE_TAG, PROBES_TAG } from '../http/admin-docs';
import { INGRESS_SECURITY, INGRESS_TAG } from '../http/ingress-docs';

/** Where the admin listener serves Swagger UI (public, like `/openapi.json`). */
export const SWAGGER_UI_PATH = 'docs';

/**
 * The document `/openapi.json` and Swagger UI serve. It is built on first use, not at start (ADR
 * 0020): scanning both applications' controllers and DTOs costs memory an idle control plane need
 * not hold. Given its builder once both listeners' applications exist (api-docs.ts).
 */
@Injectable()
export class OpenApiDocument {
  private build: (() => OpenAPIObject) | undefined;
  private document: OpenAPIObject | undefined;

  buildWith(build: () => OpenAPIObject): void {
    this.build = build;
    this.document = undefined;
  }

  get(): OpenAPIObject {
    if (!this.document) {
      if (!this.build)
        throw new UnavailableError('openapi_not_built', 'the OpenAPI document is not built yet');
      this.document = this.build();
    }
    return this.document;
  }
}

// The ingress server URL shows the defaults (a listener may pick its port at start), so the document
// is stable. The admin server is relative: see ADMIN_SERVER.
const DEFAULTS = loadConfig({});

/**
 * The admin paths' server: the origin the document was read from. Swagger UI resolves a relative URL
 * against the page it runs in, so "Try it out" calls the listener that served it, on whatever host and
 * port, and never sends the API key to a fixed address (a hard-coded `127.0.0.1:8080` failed on any
 * other port and handed the bearer token to whatever listened on 8080).
 */
export const ADMIN_SERVER = {
  url: '/',
  description: 'this admin listener (the origin this document is served from)',
};

/** The version in package.json: the document's `info.version` (the badge Swagger UI shows). */
export function packageVersion(from = __dirname): string {
  for (let dir = from; ; dir = dirname(dir)) {
    try {
      const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as {
        name?: string;
        version?: string;
      };
      if (pkg.name === 'qinglong-remote-worker' && pkg.version) return pkg.version;
    } catch {
      // no package.json here: look one folder up
    }
    if (dirname(dir) === dir) throw new Error(`no package.json of qinglong-remote-worker above ${from}`);
  }
}

const base = () =>
  new DocumentBuilder()
    .setOpenAPIVersion('3.1.0')
    .setTitle('QingLong remote worker control plane')
    .setVersion(packageVersion())
    .setDescription(
      'Two listeners. The admin listener (plain HTTP) serves the admin API, the probes, `/metrics`, this ' +
        'document and Swagger UI at `/docs`; its errors are `application/problem+json` with a stable `code`. ' +
        `The worker ingress listener (TLS 1.3, client certificate required) serves \`POST ${INGRESS_PREFIX}/{workerId}/sessions/{sessionId}/{action}\`; ` +
        'its errors are JSON `{code, message, reason?}`. Request bodies of both are strict JSON objects and ' +
        'unknown fields are refused (400), never stripped; numbers are never read from strings.',
    )
    .addServer(ADMIN_SERVER.url, ADMIN_SERVER.description)
    .addBearerAuth(
      { type: 'http', scheme: 'bearer', bearerFormat: 'qlk_…', description: 'API key; roles viewer < admin' },
      ADMIN_SECURITY,
    )
    // OpenAPI 3.1's scheme for client certificates; @nestjs/swagger's types predate it.
    .addSecurity(INGRESS_SECURITY, {
      type: 'mutualTLS' as SecuritySchemeObject['type'],
      description:
        'a client certificate chaining to the worker CA, with URI SAN spiffe://<trust-domain>/worker/<workerId>',
    })
    .addTag(ADMIN_TAG, 'admin API on the admin listener; every mutation is audited')
    .addTag(PROBES_TAG, 'probes and this document on the admin listener; no credentials')
    .addTag(
      CONSOLE_TAG,
      'the web console: its page and assets on the admin listener (sign-in is `POST /api/v1/session`)',
    )
    .addTag(INGRESS_TAG, 'worker ingress on its own mTLS listener (see the servers of its paths)')
    .build();

const INGRESS_SERVER = {
  url: 'https://{host}:{port}',
  description: 'worker ingress listener (QL_INGRESS_HOST, QL_INGRESS_PORT); mTLS',
  variables: {
    host: { default: DEFAULTS.ingressHost },
    port: { default: String(DEFAULTS.ingressPort) },
  },
};

/** Swagger UI's page is served outside Nest (api-docs.ts), so no controller describes it. */
const SWAGGER_UI_ROUTE = {
  get: {
    operationId: 'swagger_ui',
    summary: 'Swagger UI over this document (its scripts and styles are under the same path)',
    tags: [PROBES_TAG],
    responses: { '200': { description: 'HTML', content: { 'text/html': { schema: { type: 'string' } } } } },
  },
};

/**
 * One OpenAPI document for both listeners (R-ADM-2), generated from their controllers and DTO
 * classes: the admin paths under the top-level server, the ingress paths each with the ingress
 * server. Request schemas are closed (`additionalProperties: false`): the edge pipe refuses unknown
 * fields at every depth.
 */
export function buildOpenApiDocument(admin: INestApplication, ingress: INestApplication): OpenAPIObject {
  const config = base();
  const adminDoc = SwaggerModule.createDocument(admin, config);
  const ingressDoc = SwaggerModule.createDocument(ingress, config);
  const ingressPaths = Object.fromEntries(
    Object.entries(ingressDoc.paths).map(([path, item]) => [path, { ...item, servers: [INGRESS_SERVER] }]),
  );
  const document: OpenAPIObject = {
    ...adminDoc,
    paths: { ...adminDoc.paths, [`/${SWAGGER_UI_PATH}`]: SWAGGER_UI_ROUTE, ...ingressPaths },
    components: {
      ...adminDoc.components,
      schemas: mergeSchemas(adminDoc.components?.schemas ?? {}, ingressDoc.components?.schemas ?? {}),
    },
  };
  closeRequestSchemas(document);
  return document;
}

function mergeSchemas<T>(a: Record<string, T>, b: Record<string, T>): Record<string, T> {
  for (const [name, schema] of Object.entries(b))
    if (name in a && JSON.stringify(a[name]) !== JSON.stringify(schema))
      throw new Error(`two different OpenAPI schemas are named ${name}`);
  return { ...a, ...b };
}

type Json = { [key: string]: unknown };

/** Every schema a request body reaches gets `additionalProperties: false` (maps keep theirs). */
function closeRequestSchemas(document: OpenAPIObject): void {
  const schemas = (document.components?.schemas ?? {}) as Record<string, Json>;
  const closed = new Set<string>();
  const visit = (node: unknown): void => {
    if (Array.isArray(node)) return node.forEach(visit);
    if (node === null || typeof node !== 'object') return;
    const ref = (node as Json).$ref;
    if (typeof ref === 'string') {
      const name = ref.slice(ref.lastIndexOf('/') + 1);
      const schema = schemas[name];
      if (!schema || closed.has(name)) return;
      closed.add(name);
      if (schema.type === 'object' && schema.additionalProperties === undefined)
        schema.additionalProperties = false;
      return visit(schema);
    }
    Object.values(node).forEach(visit);
  };
  for (const item of Object.values(document.paths))
    for (const operation of Object.values(item as Json)) visit((operation as Json)?.requestBody);
}
