import { applyDecorators } from '@nestjs/common';
import {
  ApiExtraModels,
  ApiProperty,
  ApiPropertyOptional,
  ApiResponse,
  SchemaObject,
  getSchemaPath,
} from '@nestjs/swagger';
import { FENCE_REASONS } from '@ql/domain';
import { INGRESS_ERROR_CODES, IngressError, IngressErrorCode } from '@ql/contracts';
import { ADMIN_ERROR_CODES, AdminErrorCode, Problem } from './admin-errors';

/** The documented error bodies of both listeners (R-WIRE-3, R-ADM-2), as OpenAPI schemas. */

export class IngressErrorDto implements IngressError {
  @ApiProperty({ enum: INGRESS_ERROR_CODES })
  readonly code!: IngressErrorCode;

  @ApiProperty({ description: 'for people; a 400 names the offending field (`capabilities.gpus[0].model`)' })
  readonly message!: string;

  @ApiProperty({
    enum: FENCE_REASONS,
    required: false,
    description: 'why a fence refused the call (409 only)',
  })
  readonly reason?: string;

  @ApiProperty({
    type: 'integer',
    minimum: 1,
    required: false,
    description: 'seconds to wait before the next call of this worker, as `Retry-After` says (429 only)',
  })
  readonly retryAfterSeconds?: number;
}

export class ProblemDto implements Problem {
  @ApiProperty({ example: 'urn:qinglong:problem:invalid_request' })
  readonly type!: string;

  @ApiProperty({ example: 'invalid request' })
  readonly title!: string;

  @ApiProperty({ type: 'integer' })
  readonly status!: number;

  @ApiProperty({ enum: ADMIN_ERROR_CODES })
  readonly code!: AdminErrorCode;

  @ApiProperty({ description: 'for people; a 400 names the offending field' })
  readonly detail!: string;

  @ApiProperty({ required: false, description: 'a low-cardinality reason (409)' })
  readonly reason?: string;

  @ApiPropertyOptional({
    type: 'object',
    additionalProperties: true,
    description: 'the result of every readiness check (503 from /readyz)',
  })
  readonly checks?: unknown;
}

const withCode = (codes: readonly string[]): SchemaObject => ({
  allOf: [
    { $ref: getSchemaPath(IngressErrorDto) },
    { type: 'object', properties: { code: { type: 'string', enum: [...codes] } } },
  ],
});

/** Every status an ingress action may answer besides 200, with its codes. */
const INGRESS_ANSWERS: readonly [number, readonly IngressErrorCode[], string][] = [
  [
    400,
    ['invalid_worker_request'],
    'the body breaks a rule (strict JSON, shape, limits, semantics); nothing was written',
  ],
  [
    401,
    ['worker_authentication_required', 'certificate_revoked'],
    'no usable client certificate principal, or the path worker id is not the certificate’s; `certificate_revoked`: a revoked certificate (enroll again with a new token); decided before any other repository call',
  ],
  [404, ['worker_route_not_found'], 'another method than POST, a query string, an unknown path or action'],
  [413, ['worker_request_too_large'], 'over the route’s byte limit'],
  [
    429,
    ['worker_rate_limited'],
    'over the worker’s rate, all its routes together; `Retry-After` and `retryAfterSeconds` say when to call again',
  ],
  [
    503,
    ['worker_ingress_unavailable'],
    'the database cannot be reached, or an answer could not be built safely (with `Retry-After`)',
  ],
];

/** The error answers of one ingress action; `fences` are the 409 codes it can answer (with `reason`). */
export function IngressErrorResponses(
  fences: readonly IngressErrorCode[],
  /** A route's own answers (enrollment, ADR 0045): a status here replaces the common one. */
  own: readonly (readonly [number, readonly IngressErrorCode[], string])[] = [],
) {
  const answers = [
    ...INGRESS_ANSWERS.filter(([status]) => !own.some(([mine]) => mine === status)),
    ...(fences.length ? [[409, fences, 'a fence refused the call; `reason` says which'] as const] : []),
    ...own,
  ].sort(([a], [b]) => a - b);
  return applyDecorators(
    ApiExtraModels(IngressErrorDto),
    ...answers.map(([status, codes, description]) =>
      ApiResponse({
        status,
        description: `${codes.map((c) => `\`${c}\``).join(' | ')}: ${description}`,
        content: { 'application/json': { schema: withCode(codes) } },
        ...(status === 503 || status === 429
          ? {
              headers: {
                'Retry-After': {
                  description: 'seconds to wait before retrying',
                  schema: { type: 'integer', minimum: 1 },
                },
              },
            }
          : {}),
      }),
    ),
  );
}

const problem = (description: string) => ({
  description,
  content: { 'application/problem+json': { schema: { $ref: getSchemaPath(ProblemDto) } } },
});

/** Admin errors: `application/problem+json` with a stable `code`, by status where a route names them. */
export function AdminErrorResponses(statuses: Partial<Record<400 | 404 | 409 | 413, string>> = {}) {
  return applyDecorators(
    ApiExtraModels(ProblemDto),
    ApiResponse({
      status: 'default',
      ...problem(
        'an error: 401 no valid API key, 403 role too low, 503 `unavailable` when the database cannot be used (never 500), …',
      ),
      headers: {
        'Retry-After': {
          description: 'on 503: seconds to wait before retrying',
          schema: { type: 'integer' },
        },
      },
    }),
    ...Object.entries(statuses).map(([status, description]) =>
      ApiResponse({ status: Number(status), ...problem(description) }),
    ),
  );
}
