import { isIP } from 'node:net';

/**
 * R-WRK-7: the control-plane replicas one worker may talk to, and which failures move a call from one
 * to the next. Pure rules; the client owns the sockets.
 */
export interface IngressOrigin {
  /** `https://host:port` as configured. */
  readonly origin: string;
  readonly hostname: string;
  readonly port: string;
  /** RFC 6066: no SNI for an IP address. */
  readonly hostIsIp: boolean;
}

/** At most this many origins: each holds one keep-alive socket (R-WIRE-4 per origin). */
export const MAX_INGRESS_ORIGINS = 8;

/** Reads one `https://host[:port]` origin; anything after the port is refused. */
export function parseIngressOrigin(origin: string): IngressOrigin {
  const url = new URL(origin);
  if (
    url.protocol !== 'https:' ||
    url.pathname !== '/' ||
    url.search ||
    url.hash ||
    url.username ||
    url.password
  ) {
    throw new TypeError('WorkerIngressHttpsClient: origin must be https://host[:port] with nothing after it');
  }
  const hostname = url.hostname.replace(/^\[(.*)\]$/, '$1');
  return { origin: url.origin, hostname, port: url.port || '443', hostIsIp: isIP(hostname) !== 0 };
}

/** 1..8 distinct origins, in the order the operator listed them. */
export function parseIngressOrigins(origins: readonly string[]): readonly IngressOrigin[] {
  if (origins.length === 0 || origins.length > MAX_INGRESS_ORIGINS) {
    throw new TypeError(`WorkerIngressHttpsClient: 1..${MAX_INGRESS_ORIGINS} origins are needed`);
  }
  const parsed = origins.map(parseIngressOrigin);
  if (new Set(parsed.map((o) => o.origin)).size !== parsed.length) {
    throw new TypeError('WorkerIngressHttpsClient: an origin appears twice');
  }
  return parsed;
}

/** What a failed attempt tells the client about the origin it used. */
export interface AttemptFailure {
  readonly status: number;
  readonly code: string;
}

/**
 * A failure of the replica or the path to it, not an answer about the call: no connection, a reset or
 * TLS failure, no connection within the origin's share of the deadline, a 200 cut short, or the
 * replica saying it cannot serve (503 worker_ingress_unavailable). Every ingress action is safe to
 * send again (replays are recognised by the control plane), so the same call goes to the next origin
 * at once. Any other answer — a 4xx above all, even one whose body was cut short (its status line
 * arrived: `length_mismatch`, or `transport_error` when it had no content-length) — is the control
 * plane's word and is never retried.
 */
export function movesToNextOrigin(failure: AttemptFailure): boolean {
  if (failure.status === 503) return failure.code === 'worker_ingress_unavailable';
  if (failure.status !== 0 && failure.status !== 200) return false;
  return ['transport_error', 'connect_timeout', 'length_mismatch'].includes(failure.code);
}

type OriginFailure = { readonly origin: string; readonly code: string; readonly reason?: string };

/** Each origin with what went wrong there: `https://a:8443 (transport_error ECONNREFUSED); …`. */
export function describeFailures(failures: readonly OriginFailure[]): string {
  return failures.map((f) => `${f.origin} (${f.code}${f.reason ? ` ${f.reason}` : ''})`).join('; ');
}

/** The one error of a call no origin answered: each origin with what went wrong there. */
export function describeUnreachable(failures: readonly OriginFailure[]): string {
  return `no control-plane origin answered: ${describeFailures(failures)}`;
}
