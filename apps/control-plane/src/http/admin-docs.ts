import { applyDecorators } from '@nestjs/common';
import { ApiBearerAuth, ApiQuery, ApiTags } from '@nestjs/swagger';
import { DEFAULT_PAGE, MAX_PAGE } from '../admin/query-params';
import { AdminErrorResponses } from './error-responses';

/** OpenAPI tags and security scheme of the admin listener (openapi-document.ts declares them). */
export const ADMIN_TAG = 'admin';
export const PROBES_TAG = 'probes';
export const CONSOLE_TAG = 'console';
export const ADMIN_SECURITY = 'apiKey';

/** Class-level: an admin API controller (API key, problem+json errors). */
export const AdminController = () =>
  applyDecorators(ApiTags(ADMIN_TAG), ApiBearerAuth(ADMIN_SECURITY), AdminErrorResponses());

/** Integers in a query are plain decimal digits (`readQueryInt`); anything else is 400 `invalid_request`. */
const DECIMAL_ONLY = 'decimal digits only: no sign, spaces, point, exponent, hex or leading zero';

/** An integer query parameter as `readQueryInt` reads it. */
export const IntegerQuery = (
  name: string,
  min: number,
  max: number,
  description: string,
  fallback?: number,
) =>
  ApiQuery({
    name,
    required: false,
    schema: {
      type: 'integer',
      minimum: min,
      maximum: max,
      ...(fallback === undefined ? {} : { default: fallback }),
    },
    description: `${description}; ${DECIMAL_ONLY}`,
  });

/** `?limit=` of every admin list (`readLimit`). */
export const LimitQuery = () => IntegerQuery('limit', 1, MAX_PAGE, 'page size', DEFAULT_PAGE);

export const TextQuery = (
  name: string,
  description: string,
  schema: Record<string, unknown> = { type: 'string' },
) => ApiQuery({ name, required: false, schema, description });
