import { ADMIN_ERROR_CODES } from '../http/admin-errors';

/**
 * The OpenAPI document of the admin listener, written by hand next to the routes it describes; a test
 * checks that every admin route is in it and that `docs/openapi.json` is this document (R-ADM-2).
 */
const problem = { $ref: '#/components/responses/Problem' };
const auth = [{ apiKey: [] }];
const workerId = {
  name: 'workerId',
  in: 'path',
  required: true,
  schema: { type: 'string', pattern: '^[a-z0-9][a-z0-9-]{0,62}$' },
};

export const OPENAPI_DOCUMENT = {
  openapi: '3.1.0',
  info: {
    title: 'QingLong remote worker control plane — admin API',
    version: '1.0.0',
    description:
      'Admin REST API and probes (plain HTTP listener). Worker ingress is served on a separate mTLS listener and documented under x-worker-ingress.',
  },
  components: {
    securitySchemes: {
      apiKey: { type: 'http', scheme: 'bearer', description: 'API key `qlk_…`; roles viewer < admin' },
    },
    responses: {
      Problem: {
        description: 'Error (application/problem+json) with a stable `code`',
        content: { 'application/problem+json': { schema: { $ref: '#/components/schemas/Problem' } } },
      },
    },
    schemas: {
      Problem: {
        type: 'object',
        required: ['type', 'title', 'status', 'code', 'detail'],
        properties: {
          type: { type: 'string' },
          title: { type: 'string' },
          status: { type: 'integer' },
          code: { type: 'string', enum: ADMIN_ERROR_CODES },
          detail: { type: 'string' },
          reason: { type: 'string' },
        },
      },
      Worker: {
        type: 'object',
        properties: {
          workerId: { type: 'string' },
          disabled: { type: 'boolean' },
          status: { type: 'string', enum: ['online', 'draining', 'offline'] },
          sessionId: { type: 'string', format: 'uuid' },
          generation: { type: 'integer' },
          version: { type: 'integer' },
          leaseExpiresAt: { type: 'string', format: 'date-time' },
          maxConcurrentRuns: { type: 'integer' },
          availableSlots: { type: 'integer' },
          softwareVersion: { type: 'string' },
          protocolVersion: { type: 'integer' },
          capabilities: { type: 'object' },
          capabilitiesDigest: { type: 'string' },
          registeredAt: { type: 'string', format: 'date-time' },
          lastSeenAt: { type: 'string', format: 'date-time' },
        },
      },
      ApiKey: {
        type: 'object',
        properties: {
          id: { type: 'string', format: 'uuid' },
          name: { type: 'string' },
          role: { type: 'string', enum: ['viewer', 'admin'] },
          createdAt: { type: 'string', format: 'date-time' },
          revokedAt: { type: ['string', 'null'], format: 'date-time' },
        },
      },
    },
  },
  paths: {
    '/livez': { get: { summary: 'Process liveness', responses: { '200': { description: 'alive' } } } },
    '/readyz': {
      get: {
        summary: 'Readiness: database reachable, migrations applied, startup done, not shutting down',
        responses: { '200': { description: 'ready' }, '503': { description: 'not ready' } },
      },
    },
    '/openapi.json': {
      get: { summary: 'This document', responses: { '200': { description: 'OpenAPI 3.1' } } },
    },
    '/api/v1/workers': {
      get: {
        summary: 'List workers (keyset pagination on worker id)',
        security: auth,
        parameters: [
          {
            name: 'status',
            in: 'query',
            schema: { type: 'string', enum: ['online', 'draining', 'offline'] },
          },
          {
            name: 'after',
            in: 'query',
            schema: { type: 'string' },
            description: 'worker id to continue after (nextAfter)',
          },
          { name: 'limit', in: 'query', schema: { type: 'integer', minimum: 1, maximum: 200, default: 50 } },
        ],
        responses: {
          '200': {
            description: 'a page of workers',
            content: {
              'application/json': {
                schema: {
                  type: 'object',
                  properties: {
                    items: { type: 'array', items: { $ref: '#/components/schemas/Worker' } },
                    nextAfter: { type: ['string', 'null'] },
                  },
                },
              },
            },
          },
          default: problem,
        },
      },
    },
    '/api/v1/workers/{workerId}': {
      get: {
        summary: 'Worker detail: session, generation, version, lease expiry, capabilities',
        security: auth,
        parameters: [workerId],
        responses: {
          '200': {
            description: 'worker',
            content: { 'application/json': { schema: { $ref: '#/components/schemas/Worker' } } },
          },
          default: problem,
        },
      },
    },
    '/api/v1/workers/{workerId}/disable': {
      post: {
        summary:
          'Disable a worker: fences its session now; every replica refuses it from the same commit (admin)',
        security: auth,
        parameters: [workerId],
        responses: {
          '200': {
            description: 'worker',
            content: { 'application/json': { schema: { $ref: '#/components/schemas/Worker' } } },
          },
          default: problem,
        },
      },
    },
    '/api/v1/workers/{workerId}/enable': {
      post: {
        summary: 'Allow a disabled worker to register a new session (admin)',
        security: auth,
        parameters: [workerId],
        responses: {
          '200': {
            description: 'worker',
            content: { 'application/json': { schema: { $ref: '#/components/schemas/Worker' } } },
          },
          default: problem,
        },
      },
    },
    '/api/v1/api-keys': {
      get: {
        summary: 'List API keys (never the keys themselves) (admin)',
        security: auth,
        responses: { '200': { description: 'keys' }, default: problem },
      },
      post: {
        summary: 'Create an API key; the token is returned once (admin)',
        security: auth,
        requestBody: {
          required: true,
          content: {
            'application/json': {
              schema: {
                type: 'object',
                additionalProperties: false,
                required: ['name', 'role'],
                properties: {
                  name: { type: 'string', maxLength: 100 },
                  role: { type: 'string', enum: ['viewer', 'admin'] },
                },
              },
            },
          },
        },
        responses: { '201': { description: 'created; includes `token`' }, default: problem },
      },
    },
    '/api/v1/api-keys/{id}/revoke': {
      post: {
        summary: 'Revoke an API key (admin)',
        security: auth,
        parameters: [{ name: 'id', in: 'path', required: true, schema: { type: 'string', format: 'uuid' } }],
        responses: {
          '200': {
            description: 'revoked key',
            content: { 'application/json': { schema: { $ref: '#/components/schemas/ApiKey' } } },
          },
          default: problem,
        },
      },
    },
    '/api/v1/certificates/revoke': {
      post: {
        summary:
          'Revoke a worker certificate by SHA-256 fingerprint; every replica refuses it within QL_REVOCATION_CACHE_MS (admin)',
        security: auth,
        requestBody: {
          required: true,
          content: {
            'application/json': {
              schema: {
                type: 'object',
                additionalProperties: false,
                required: ['fingerprint'],
                properties: {
                  fingerprint: { type: 'string', description: '64 hex digits; colons and case are ignored' },
                  reason: { type: 'string', maxLength: 200 },
                },
              },
            },
          },
        },
        responses: {
          '200': { description: 'the revocation (the first one, if revoked before)' },
          default: problem,
        },
      },
    },
    '/api/v1/certificates/revoked': {
      get: {
        summary: 'Revoked certificates, newest first (admin)',
        security: auth,
        parameters: [{ name: 'limit', in: 'query', schema: { type: 'integer', minimum: 1, maximum: 200 } }],
        responses: { '200': { description: 'revocations' }, default: problem },
      },
    },
    '/api/v1/audit': {
      get: {
        summary: 'Recent admin mutations: who, what, when (admin)',
        security: auth,
        parameters: [{ name: 'limit', in: 'query', schema: { type: 'integer', minimum: 1, maximum: 200 } }],
        responses: { '200': { description: 'entries, newest first' }, default: problem },
      },
    },
  },
  'x-worker-ingress': {
    listener:
      'separate; TLS 1.3 with a client certificate from the worker CA (URI SAN spiffe://<trust-domain>/worker/<workerId>)',
    path: 'POST /api/v3/worker-ingress/workers/{workerId}/sessions/{sessionId}/{action}',
    actions: {
      register:
        '{capabilities, maxConcurrentRuns, availableSlots, softwareVersion, protocolVersion} ≤ 20 KiB',
      heartbeat: '{generation, expectedVersion, availableSlots} ≤ 4 KiB',
      drain: '{generation, expectedVersion} ≤ 4 KiB',
      offline: '{generation, expectedVersion} ≤ 4 KiB',
    },
    errors:
      '{code, message, reason?}: 400 invalid_worker_request, 401 worker_authentication_required, 404 worker_route_not_found, 409 worker_session_fenced, 413 worker_request_too_large, 429 worker_rate_limited, 503 worker_ingress_unavailable',
  },
} as const;
