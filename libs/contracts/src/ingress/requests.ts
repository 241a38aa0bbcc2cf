/**
 * Every ingress call by action (ADR 0056): its descriptor, its request type, and the worker's one
 * way to build a lease call's body from the session fence of its turn and the call's own fields.
 */
import { IngressCall } from './call';
import { BUNDLE, BundleRequest, buildBundleRequest } from './bundle';
import { CERTIFICATE, CertificateRequest } from './certificate';
import { COMPLETION, CompletionRequest, buildCompletionRequest } from './completion';
import { DRAIN, DrainRequest } from './drain';
import { ENROLL, EnrollRequest } from './enroll';
import { HEARTBEAT, HeartbeatRequest } from './heartbeat';
import { LOGS, LogsRequest, buildLogsRequest } from './logs';
import { OFFERS, PullRequest, buildPullRequest } from './offers';
import { OFFLINE, OfflineRequest } from './offline';
import { REGISTER, RegisterRequest } from './register';
import { RELEASE, ReleaseRequest, buildReleaseRequest } from './release';
import { RENEW, RenewRequest, buildRenewRequest } from './renew';
import { RUNNING, RunningRequest, buildRunningRequest } from './running';
import { SECRETS, SecretsRequest, buildSecretsRequest } from './secrets';
import { SessionFenceRequest } from './session';
import { START_FAILURE, StartFailureRequest, buildStartFailureRequest } from './start-failure';
import { STARTING, StartingRequest, buildStartingRequest } from './starting';

/** The request body of each call. */
export interface IngressRequests {
  register: RegisterRequest;
  heartbeat: HeartbeatRequest;
  drain: DrainRequest;
  offline: OfflineRequest;
  offers: PullRequest;
  renew: RenewRequest;
  release: ReleaseRequest;
  starting: StartingRequest;
  running: RunningRequest;
  'start-failure': StartFailureRequest;
  completion: CompletionRequest;
  logs: LogsRequest;
  secrets: SecretsRequest;
  bundle: BundleRequest;
  enroll: EnrollRequest;
  certificate: CertificateRequest;
}

/** Every call's descriptor, by action. */
export const INGRESS_CALLS: { readonly [A in keyof IngressRequests]: IngressCall<A> } = {
  register: REGISTER,
  heartbeat: HEARTBEAT,
  drain: DRAIN,
  offline: OFFLINE,
  offers: OFFERS,
  renew: RENEW,
  release: RELEASE,
  starting: STARTING,
  running: RUNNING,
  'start-failure': START_FAILURE,
  completion: COMPLETION,
  logs: LOGS,
  secrets: SECRETS,
  bundle: BUNDLE,
  enroll: ENROLL,
  certificate: CERTIFICATE,
};

/** The calls a lease holder makes after its pull: each carries the session fence first. */
export type LeaseCallAction =
  | 'offers'
  | 'renew'
  | 'release'
  | 'starting'
  | 'running'
  | 'start-failure'
  | 'completion'
  | 'logs'
  | 'secrets'
  | 'bundle';

/** What the caller gives of a lease call's body: all but the session fence the chain adds. */
export type LeaseCallFields<A extends LeaseCallAction> = Omit<IngressRequests[A], keyof SessionFenceRequest>;

type Builder<A extends LeaseCallAction> = (
  fence: SessionFenceRequest,
  fields: LeaseCallFields<A>,
) => IngressRequests[A];

const LEASE_CALL_BUILDERS: { readonly [A in LeaseCallAction]: Builder<A> } = {
  offers: buildPullRequest,
  renew: buildRenewRequest,
  release: buildReleaseRequest,
  starting: buildStartingRequest,
  running: buildRunningRequest,
  'start-failure': buildStartFailureRequest,
  completion: buildCompletionRequest,
  logs: buildLogsRequest,
  secrets: buildSecretsRequest,
  bundle: buildBundleRequest,
};

/** A lease call's body in wire order: the session fence of the call's turn, then its own fields. */
export function buildLeaseCallRequest<A extends LeaseCallAction>(
  action: A,
  fence: SessionFenceRequest,
  fields: LeaseCallFields<A>,
): IngressRequests[A] {
  return (LEASE_CALL_BUILDERS[action] as Builder<A>)(fence, fields);
}
