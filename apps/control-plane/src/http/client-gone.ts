import type { FastifyReply } from 'fastify';

/**
 * Runs a held request (a log tail, a long-poll pull) with a signal that aborts when the client goes
 * away: nothing keeps waiting for a reader who left.
 */
export async function whileClientWaits<T>(
  reply: FastifyReply,
  held: (signal: AbortSignal) => Promise<T>,
): Promise<T> {
  const gone = new AbortController();
  const onClose = () => gone.abort();
  reply.raw.once('close', onClose);
  try {
    return await held(gone.signal);
  } finally {
    reply.raw.off('close', onClose);
  }
}
