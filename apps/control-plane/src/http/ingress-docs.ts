import { applyDecorators } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiParam, ApiSecurity, ApiTags } from '@nestjs/swagger';
import { UUID_V7_PATTERN, WORKER_ID_PATTERN } from '@ql/domain';
import { IngressAction, IngressErrorCode, ingressBodyLimit } from '@ql/contracts';
import { IngressErrorResponses } from './error-responses';

/** OpenAPI tag and security scheme of the worker ingress listener (openapi-document.ts declares both). */
export const INGRESS_TAG = 'worker ingress';
export const INGRESS_SECURITY = 'workerCertificate';

/** Class-level: the listener, its client-certificate security and the two path parameters. */
export const IngressController = () =>
  applyDecorators(
    ApiTags(INGRESS_TAG),
    ApiSecurity(INGRESS_SECURITY),
    ApiParam({
      name: 'workerId',
      schema: { type: 'string', pattern: WORKER_ID_PATTERN.source },
      description: 'must be the worker id of the client certificate',
    }),
    ApiParam({
      name: 'sessionId',
      schema: { type: 'string', pattern: UUID_V7_PATTERN.source },
      description: 'UUIDv7 the worker made at its process start',
    }),
  );

/** One ingress action: what it does, its byte limit, its 200 answer and its error answers. */
export const IngressOperation = (
  action: IngressAction,
  summary: string,
  ok: Parameters<typeof ApiOkResponse>[0],
  fences: readonly IngressErrorCode[],
  own?: Parameters<typeof IngressErrorResponses>[1],
) =>
  applyDecorators(
    ApiOperation({
      summary,
      operationId: `ingress_${action}`,
      description: `Body at most ${ingressBodyLimit(action) / 1024} KiB of strict JSON; unknown fields are refused.`,
    }),
    ApiOkResponse(ok),
    IngressErrorResponses(fences, own),
  );
