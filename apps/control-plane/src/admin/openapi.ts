import {
  ATTEMPT_STATUSES,
  CAPABILITY_LIMITS,
  CRON_MAX_LENGTH,
  LABEL_KEY_PATTERN,
  PLACEMENT_LIMITS,
  PLACEMENT_REASONS,
  RUN_EVENT_TYPES,
  RUN_STATUSES,
  TASK_EXECUTORS,
  TASK_LIMITS,
  TASK_NAME_PATTERN,
  TASK_RUNTIMES,
  TOKEN_PATTERN,
} from '@ql/domain';
import { EXECUTION_OFFER_SCHEMA } from '@ql/contracts';
import { ADMIN_ERROR_CODES } from '../http/admin-errors';
import { IDEMPOTENCY_KEY_PATTERN } from '../runs/resource-ids';
import { MAX_PAGE } from './query-params';

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

const uuidV7 = { type: 'string', format: 'uuid', description: 'UUIDv7' };
const taskId = { name: 'taskId', in: 'path', required: true, schema: uuidV7 };
const runId = { name: 'runId', in: 'path', required: true, schema: uuidV7 };
/** Integers in a query are plain decimal digits (`readQueryInt`); anything else is 400 `invalid_request`. */
const DECIMAL_ONLY = 'decimal digits only: no sign, spaces, point, exponent, hex or leading zero';
const limit = {
  name: 'limit',
  in: 'query',
  schema: { type: 'integer', minimum: 1, maximum: MAX_PAGE, default: 50 },
  description: `page size; ${DECIMAL_ONLY}`,
};
const time = { type: 'string', format: 'date-time' };
const nullableTime = { type: ['string', 'null'], format: 'date-time' };
const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
const json = (schema: unknown) => ({ 'application/json': { schema } });
const page = (item: string, cursor: 'nextAfter' | 'nextBefore', cursorType: string) => ({
  type: 'object',
  properties: {
    items: { type: 'array', items: ref(item) },
    [cursor]: {
      type: [cursorType, 'null'],
      description: `pass as ?${cursor.slice(4).toLowerCase()}= for the next page`,
    },
  },
});
const tokenSet = (maxItems: number) => ({
  type: 'array',
  maxItems,
  uniqueItems: true,
  items: { type: 'string', maxLength: CAPABILITY_LIMITS.tokenLength, pattern: TOKEN_PATTERN.source },
});
const mebibytes = { type: 'integer', minimum: 0, maximum: CAPABILITY_LIMITS.mebibytes };
const taskBody = {
  required: true,
  content: json(ref('TaskInput')),
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
        description:
          'Error (application/problem+json) with a stable `code`; 503 `unavailable` when the database cannot be used (never 500)',
        headers: {
          'Retry-After': {
            description: 'on 503: seconds to wait before retrying',
            schema: { type: 'integer' },
          },
        },
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
      PlacementSpec: {
        type: 'object',
        additionalProperties: false,
        description: 'R-PLC-1; unknown fields, duplicates and over-limit sets are refused (400)',
        properties: {
          required: {
            type: 'object',
            additionalProperties: false,
            properties: {
              architectures: { ...tokenSet(PLACEMENT_LIMITS.architectures), description: 'any of; [] = any' },
              operatingSystems: { ...tokenSet(PLACEMENT_LIMITS.operatingSystems), description: 'any of' },
              executors: { ...tokenSet(PLACEMENT_LIMITS.executors), description: 'all of' },
              runtimes: {
                type: 'array',
                maxItems: PLACEMENT_LIMITS.runtimes,
                items: {
                  type: 'object',
                  additionalProperties: false,
                  required: ['name', 'range'],
                  properties: {
                    name: { type: 'string' },
                    range: {
                      type: 'string',
                      maxLength: PLACEMENT_LIMITS.rangeLength,
                      description: 'semver range',
                    },
                  },
                },
              },
              labels: {
                type: 'object',
                maxProperties: PLACEMENT_LIMITS.labels,
                propertyNames: { pattern: LABEL_KEY_PATTERN.source },
                additionalProperties: { type: 'string', maxLength: CAPABILITY_LIMITS.labelValueLength },
                description: 'every one must be present with exactly this value',
              },
              minMemoryMiB: mebibytes,
              minDiskMiB: mebibytes,
              gpu: {
                type: ['object', 'null'],
                additionalProperties: false,
                required: ['vendor'],
                properties: { vendor: { type: 'string' }, features: tokenSet(PLACEMENT_LIMITS.gpuFeatures) },
              },
            },
          },
          preferred: {
            type: 'array',
            maxItems: PLACEMENT_LIMITS.preferred,
            description: 'orders matching workers only',
            items: {
              type: 'object',
              additionalProperties: false,
              required: ['key', 'value', 'weight'],
              properties: {
                key: { type: 'string' },
                value: { type: 'string' },
                weight: { type: 'integer', minimum: 1, maximum: 100 },
              },
            },
          },
        },
      },
      TaskInput: {
        type: 'object',
        additionalProperties: false,
        required: ['name', 'command', 'runtime'],
        description: `A task revision; its canonical JSON is at most ${TASK_LIMITS.specBytes / 1024} KiB`,
        properties: {
          name: { type: 'string', maxLength: TASK_LIMITS.nameLength, pattern: TASK_NAME_PATTERN.source },
          command: {
            type: 'string',
            minLength: 1,
            description: `at most ${TASK_LIMITS.commandBytes / 1024} KiB of UTF-8; tab, LF and CR are the only control characters`,
          },
          runtime: { type: 'string', enum: TASK_RUNTIMES },
          executor: { type: 'string', enum: TASK_EXECUTORS, default: 'local-process' },
          placement: ref('PlacementSpec'),
          timeoutMs: {
            type: 'integer',
            minimum: TASK_LIMITS.minTimeoutMs,
            maximum: TASK_LIMITS.maxTimeoutMs,
            default: TASK_LIMITS.defaultTimeoutMs,
          },
          retry: {
            type: ['object', 'null'],
            additionalProperties: false,
            required: ['maxAttempts', 'initialBackoffMs'],
            properties: {
              maxAttempts: { type: 'integer', minimum: 2, maximum: TASK_LIMITS.maxAttempts },
              initialBackoffMs: {
                type: 'integer',
                minimum: TASK_LIMITS.minBackoffMs,
                maximum: TASK_LIMITS.maxBackoffMs,
              },
              multiplier: { type: 'integer', minimum: 1, maximum: 10, default: 2 },
              maxBackoffMs: { type: 'integer', maximum: TASK_LIMITS.maxBackoffMs },
            },
          },
          env: {
            type: 'object',
            maxProperties: TASK_LIMITS.envEntries,
            additionalProperties: { type: 'string', maxLength: TASK_LIMITS.envValueBytes },
            description: `non-secret; at most ${TASK_LIMITS.envBytes / 1024} KiB in all`,
          },
          cron: {
            type: ['string', 'null'],
            maxLength: CRON_MAX_LENGTH,
            description: 'five numeric fields (minute hour day-of-month month day-of-week), UTC',
          },
          priority: { type: 'integer', minimum: 0, maximum: TASK_LIMITS.maxPriority, default: 0 },
        },
      },
      Task: {
        type: 'object',
        properties: {
          id: uuidV7,
          name: { type: 'string' },
          revision: { type: 'integer', minimum: 1 },
          digest: { type: 'string', description: 'SHA-256 (hex) of the canonical spec' },
          spec: { ...ref('TaskInput'), description: 'canonical: every field present, sets sorted' },
          createdAt: time,
          updatedAt: time,
        },
      },
      TaskRevision: {
        type: 'object',
        description: 'immutable',
        properties: {
          taskId: uuidV7,
          revision: { type: 'integer', minimum: 1 },
          digest: { type: 'string' },
          spec: ref('TaskInput'),
          createdAt: time,
        },
      },
      Run: {
        type: 'object',
        properties: {
          id: uuidV7,
          taskId: uuidV7,
          revision: { type: 'integer', description: 'the pinned task revision' },
          specDigest: { type: 'string' },
          status: { type: 'string', enum: RUN_STATUSES },
          version: { type: 'integer' },
          priority: { type: 'integer' },
          trigger: { type: 'string', enum: ['manual', 'cron'] },
          scheduledAt: nullableTime,
          attemptCount: { type: 'integer' },
          currentAttemptId: { type: ['string', 'null'], format: 'uuid' },
          cancelRequested: { type: 'boolean' },
          createdAt: time,
          updatedAt: time,
          finishedAt: nullableTime,
        },
      },
      RunDetail: {
        allOf: [
          ref('Run'),
          {
            type: 'object',
            properties: {
              placement: {
                ...ref('PlacementSpec'),
                description: "normalised with the task's own requirements",
              },
              pending: {
                type: ['object', 'null'],
                description:
                  'why a queued run is not placed (R-PLC-3): counts, never label values; null unless queued',
                properties: {
                  considered: { type: 'integer' },
                  matching: { type: 'integer' },
                  reasons: {
                    type: 'object',
                    properties: Object.fromEntries(PLACEMENT_REASONS.map((r) => [r, { type: 'integer' }])),
                  },
                  computedAt: time,
                },
              },
              attempts: { type: 'array', items: ref('Attempt') },
              events: { type: 'array', items: ref('RunEvent'), description: 'the first 200, by seq' },
            },
          },
        ],
      },
      Attempt: {
        type: 'object',
        properties: {
          id: uuidV7,
          attemptNo: { type: 'integer', minimum: 1 },
          status: { type: 'string', enum: ATTEMPT_STATUSES },
          version: { type: 'integer' },
          workerId: { type: ['string', 'null'] },
          leaseGeneration: { type: 'integer' },
          createdAt: time,
          updatedAt: time,
          finishedAt: nullableTime,
        },
      },
      RunEvent: {
        type: 'object',
        properties: {
          seq: { type: 'integer', minimum: 1, description: 'per run, 1..n without gaps' },
          type: { type: 'string', enum: RUN_EVENT_TYPES },
          attemptId: { type: ['string', 'null'], format: 'uuid' },
          at: time,
          detail: { type: ['object', 'null'] },
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
    '/metrics': {
      get: {
        summary: 'Prometheus metrics (text format 0.0.4); needs an API key (viewer)',
        security: auth,
        responses: {
          '200': { description: 'metrics', content: { 'text/plain': { schema: { type: 'string' } } } },
          '401': { description: 'no valid API key' },
        },
      },
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
          limit,
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
        parameters: [limit],
        responses: { '200': { description: 'revocations' }, default: problem },
      },
    },
    '/api/v1/audit': {
      get: {
        summary: 'Recent admin mutations: who, what, when (admin)',
        security: auth,
        parameters: [limit],
        responses: { '200': { description: 'entries, newest first' }, default: problem },
      },
    },
    '/api/v1/tasks': {
      get: {
        summary: 'List live tasks (keyset pagination on task id)',
        security: auth,
        parameters: [
          {
            name: 'after',
            in: 'query',
            schema: uuidV7,
            description: 'task id to continue after (nextAfter)',
          },
          limit,
        ],
        responses: {
          '200': { description: 'a page of tasks', content: json(page('Task', 'nextAfter', 'string')) },
          default: problem,
        },
      },
      post: {
        summary: 'Create a task at revision 1 (admin)',
        security: auth,
        requestBody: taskBody,
        responses: {
          '201': { description: 'created', content: json(ref('Task')) },
          '400': problem,
          '409': { ...problem, description: 'a live task has this name' },
          '413': problem,
          default: problem,
        },
      },
    },
    '/api/v1/tasks/{taskId}': {
      get: {
        summary: 'Task detail: current revision, digest and spec',
        security: auth,
        parameters: [taskId],
        responses: { '200': { description: 'task', content: json(ref('Task')) }, default: problem },
      },
      put: {
        summary: 'Replace the task spec; a new immutable revision only when the content changes (admin)',
        security: auth,
        parameters: [taskId],
        requestBody: taskBody,
        responses: {
          '200': {
            description: 'the task; `changed` is false when the digest is the same (no new revision)',
            content: json({
              allOf: [ref('Task'), { type: 'object', properties: { changed: { type: 'boolean' } } }],
            }),
          },
          '400': problem,
          '404': problem,
          '409': problem,
          default: problem,
        },
      },
      delete: {
        summary: 'Delete a task: runs keep their pinned revisions, cron stops (admin)',
        security: auth,
        parameters: [taskId],
        responses: {
          '200': {
            description: 'the deleted task',
            content: json({
              allOf: [
                ref('Task'),
                { type: 'object', properties: { deleted: { type: 'boolean', const: true } } },
              ],
            }),
          },
          '404': problem,
          default: problem,
        },
      },
    },
    '/api/v1/tasks/{taskId}/revisions': {
      get: {
        summary: 'Immutable revisions of a task, newest first (keyset pagination on revision)',
        security: auth,
        parameters: [
          taskId,
          {
            name: 'before',
            in: 'query',
            schema: { type: 'integer', minimum: 1, maximum: 2 ** 31 - 1 },
            description: `revision to continue before (nextBefore); ${DECIMAL_ONLY}`,
          },
          limit,
        ],
        responses: {
          '200': {
            description: 'a page of revisions',
            content: json(page('TaskRevision', 'nextBefore', 'integer')),
          },
          default: problem,
        },
      },
    },
    '/api/v1/tasks/{taskId}/runs': {
      post: {
        summary: "Trigger a run pinned to the task's current revision (admin)",
        security: auth,
        parameters: [
          taskId,
          {
            name: 'Idempotency-Key',
            in: 'header',
            schema: { type: 'string', pattern: IDEMPOTENCY_KEY_PATTERN.source },
            description:
              'the same key with the same body returns the first run (200); with another body it is 409 `conflict`',
          },
        ],
        requestBody: {
          required: true,
          content: json({
            type: 'object',
            additionalProperties: false,
            properties: {
              priority: {
                type: 'integer',
                minimum: 0,
                maximum: TASK_LIMITS.maxPriority,
                description: "default: the task's priority",
              },
            },
          }),
        },
        responses: {
          '201': {
            description: 'a new run',
            content: json({
              type: 'object',
              properties: { created: { type: 'boolean', const: true }, run: ref('Run') },
            }),
          },
          '200': {
            description: 'replay of the Idempotency-Key: the first run',
            content: json({
              type: 'object',
              properties: { created: { type: 'boolean', const: false }, run: ref('Run') },
            }),
          },
          '400': problem,
          '404': problem,
          '409': { ...problem, description: 'the Idempotency-Key was used for another request' },
          default: problem,
        },
      },
    },
    '/api/v1/runs': {
      get: {
        summary: 'List runs, newest first (keyset pagination on run id)',
        security: auth,
        parameters: [
          { name: 'status', in: 'query', schema: { type: 'string', enum: RUN_STATUSES } },
          { name: 'taskId', in: 'query', schema: uuidV7 },
          {
            name: 'before',
            in: 'query',
            schema: uuidV7,
            description: 'run id to continue before (nextBefore)',
          },
          limit,
        ],
        responses: {
          '200': { description: 'a page of runs', content: json(page('Run', 'nextBefore', 'string')) },
          default: problem,
        },
      },
    },
    '/api/v1/runs/{runId}': {
      get: {
        summary: 'Run detail: attempts, events, placement and why it is pending',
        security: auth,
        parameters: [runId],
        responses: { '200': { description: 'run', content: json(ref('RunDetail')) }, default: problem },
      },
    },
    '/api/v1/runs/{runId}/cancel': {
      post: {
        summary:
          'Request cancellation: persisted first; a queued or retry_wait run is cancelled at once, a held one is told through its lease (admin)',
        security: auth,
        parameters: [runId],
        responses: {
          '200': { description: 'the run', content: json(ref('Run')) },
          '404': problem,
          '409': { ...problem, description: 'the run has already finished' },
          default: problem,
        },
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
      offers: `{generation, expectedVersion, offerId (UUIDv7), leaseToken (≥ 256 bits, base64url)} ≤ 4 KiB → ${EXECUTION_OFFER_SCHEMA} ≤ 128 KiB: offered (run, attempt, pinned spec and digest, lease without token) or idle (reason, counters); the same offerId + token replays the offer`,
      renew:
        '{generation, expectedVersion, offerId, leaseToken, leaseGeneration, leaseVersion} ≤ 4 KiB → {lease, cancelRequested}; lease version + 1',
      release:
        '{generation, expectedVersion, offerId, leaseToken, leaseGeneration, leaseVersion} ≤ 4 KiB → {lease}; before start only, the attempt goes back to the queue',
    },
    errors:
      '{code, message, reason?}: 400 invalid_worker_request, 401 worker_authentication_required, 404 worker_route_not_found, 409 worker_session_fenced | worker_lease_fenced (with reason), 413 worker_request_too_large, 429 worker_rate_limited, 503 worker_ingress_unavailable',
  },
} as const;
