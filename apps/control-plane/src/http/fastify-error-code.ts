import { HttpException } from '@nestjs/common';

/**
 * The `FST_ERR_*` code of a Fastify error, also once Nest has wrapped it: Nest 12 maps a Fastify 4xx
 * error to an HttpException whose `cause` is the original, so the code is only on the cause.
 */
export function fastifyErrorCode(error: unknown): string | undefined {
  const own = (error as { code?: unknown } | null)?.code;
  if (typeof own === 'string') return own;
  const cause = error instanceof HttpException ? (error.cause as { code?: unknown } | undefined) : undefined;
  return typeof cause?.code === 'string' ? cause.code : undefined;
}
