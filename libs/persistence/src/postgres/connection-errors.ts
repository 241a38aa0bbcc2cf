import { UnavailableError } from '@ql/domain';

/** Socket errors of a connection that could not be made or was lost. */
const SOCKET_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
]);

/**
 * SQLSTATEs of a server that is going away or not taking connections: admin_shutdown,
 * crash_shutdown, cannot_connect_now, too_many_connections; class 08 (connection exception) by prefix.
 */
const SERVER_CODES = new Set(['57P01', '57P02', '57P03', '53300']);

/** What pg and pg-pool throw, without a code, when a connection failed, timed out or was lost. */
const MESSAGES = [
  'Connection terminated unexpectedly',
  'Connection terminated due to connection timeout',
  'timeout exceeded when trying to connect',
  'Client has encountered a connection error and is not queryable',
];

/** The one classification of "the database cannot be reached", for every caller of the adapter. */
export function isConnectionError(error: unknown): boolean {
  const code = codeOf(error);
  if (code !== undefined) return SOCKET_CODES.has(code) || SERVER_CODES.has(code) || code.startsWith('08');
  const message = error instanceof Error ? error.message : '';
  return MESSAGES.includes(message);
}

/** undefined_table: a replica started before `migrate` ran on its database (issue 16). */
const MISSING_TABLE = '42P01';

/**
 * A connection error becomes one UnavailableError (503 on both listeners), and so does a table that
 * does not exist yet (migrations pending: a state an operator ends, not a fault); anything else is
 * returned as is.
 */
export function asUnavailable(error: unknown): unknown {
  if (codeOf(error) === MISSING_TABLE)
    return new UnavailableError(
      'migrations_pending',
      'migrations pending: run `npm run migrate` with this QL_DATABASE_URL; retry later',
    );
  if (!isConnectionError(error)) return error;
  // The code, or pg's message when it has none: what an operator reading the log needs.
  const cause = codeOf(error) ?? (error as Error).message;
  return new UnavailableError(
    'database_unreachable',
    `the database cannot be reached (${cause}); retry later`,
  );
}

function codeOf(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}
