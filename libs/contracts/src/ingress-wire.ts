/** Worker ingress wire (R-WIRE-1..3): paths, per-route limits, error bodies, shared by both sides. */
import { OFFER_WAIT_MAX_MS } from '@ql/domain';
import { INGRESS_CALLS } from './ingress/requests';

/**
 * `offers` long poll (ADR 0019): a pull may carry `waitMs` (0 … this); with nothing claimable the
 * control plane holds it up to that long (capped by its `QL_OFFER_WAIT_MAX_MS`) and offers a run
 * queued meanwhile. Absent or 0: the answer comes at once, as before.
 */
export const PULL_WAIT_MAX_MS = OFFER_WAIT_MAX_MS;
export const INGRESS_ROOT = '/api/v3/worker-ingress';
export const INGRESS_PREFIX = `${INGRESS_ROOT}/workers`;
/**
 * Joining (ADR 0045 §2): the one ingress route served on a connection without a trusted client
 * certificate. Outside `INGRESS_PREFIX`, so no worker id can ever spell it.
 */
export const INGRESS_ENROLL_PATH = `${INGRESS_ROOT}/enroll`;
/** Rotation (ADR 0045 §3), over mTLS: `POST <INGRESS_PREFIX>/{workerId}/certificate`. */
export const INGRESS_CERTIFICATE_ACTION = 'certificate';
export function ingressCertificatePath(workerId: string): string {
  return `${INGRESS_PREFIX}/${encodeURIComponent(workerId)}/${INGRESS_CERTIFICATE_ACTION}`;
}
/** The Nest route of every session action (controllers add the action). */
export const INGRESS_SESSION_ROUTE = `${INGRESS_PREFIX.slice(1)}/:workerId/sessions/:sessionId`;

export const INGRESS_ACTIONS = [
  'register',
  'heartbeat',
  'drain',
  'offline',
  'offers',
  'renew',
  'release',
  'starting',
  'running',
  'start-failure',
  'completion',
  'logs',
  // ADR 0050: the lease holder's secret values, after `starting`.
  'secrets',
  'bundle',
] as const;
export type IngressAction = (typeof INGRESS_ACTIONS)[number];

const KiB = 1024;

/** Request byte limits, enforced before the body is parsed: each call's own (`ingress/<call>.ts`). */
export function ingressBodyLimit(action: string): number {
  return Object.hasOwn(INGRESS_CALLS, action)
    ? INGRESS_CALLS[action as keyof typeof INGRESS_CALLS].bodyLimit
    : 4 * KiB;
}
export const INGRESS_MAX_BODY = 68 * KiB;

export function ingressPath(workerId: string, sessionId: string, action: IngressAction): string {
  return `${INGRESS_PREFIX}/${encodeURIComponent(workerId)}/sessions/${encodeURIComponent(sessionId)}/${action}`;
}

export const INGRESS_ERROR_CODES = [
  'invalid_worker_request',
  'worker_authentication_required',
  'worker_route_not_found',
  'worker_session_fenced',
  'worker_lease_fenced',
  'worker_request_too_large',
  'worker_rate_limited',
  'worker_ingress_unavailable',
  // Joining and rotation (ADR 0045 §2, §3, §4).
  'enrollment_disabled',
  'csr_refused',
  'enrollment_token_invalid',
  'enrollment_token_wrong_worker',
  'enrollment_token_exhausted',
  'enrollment_token_used',
  'enrollment_token_may_not_replace',
  'certificate_superseded',
  'certificate_revoked',
  'certificate_unknown',
  'worker_disabled',
  // A mapped secret is gone or cannot be decrypted (ADR 0050); `reason` says which.
  'secrets_unavailable',
  // A `protocolVersion` the control plane does not serve (ADR 0060): the message names both sides.
  'protocol_unsupported',
] as const;
export type IngressErrorCode = (typeof INGRESS_ERROR_CODES)[number];

export interface IngressError {
  readonly code: IngressErrorCode;
  readonly message: string;
  readonly reason?: string;
  /** 429 only: the seconds the worker waits before its next call, as the `Retry-After` header says. */
  readonly retryAfterSeconds?: number;
}
