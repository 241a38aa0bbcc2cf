import { Initial1764547200000 as PostgresInitial } from './postgres/1764547200000-initial';
import { RevokedCertificates1764633600000 as PostgresRevoked } from './postgres/1764633600000-revoked-certificates';
import { RunsAndLeases1764720000000 as PostgresRuns } from './postgres/1764720000000-runs-and-leases';
import { ActivationAndLogs1764806400000 as PostgresActivation } from './postgres/1764806400000-activation-and-logs';
import { SessionLastCall1764892800000 as PostgresLastCall } from './postgres/1764892800000-session-last-call';
import { AdminViews1764979200000 as PostgresAdminViews } from './postgres/1764979200000-admin-views';
import { ClaimFunction1765065600000 as PostgresClaimFunction } from './postgres/1765065600000-claim-function';
import { LeaseSteps1765152000000 as PostgresLeaseSteps } from './postgres/1765152000000-lease-steps';
import { QueueSignals1765238400000 as PostgresQueueSignals } from './postgres/1765238400000-queue-signals';
import { IndexOnlyPlans1765324800000 as PostgresIndexOnlyPlans } from './postgres/1765324800000-index-only-plans';
import { WorkerRecoveryRequired1765411200000 as PostgresRecoveryRequired } from './postgres/1765411200000-worker-recovery-required';
import { EnrollmentTokens1765756800000 as PostgresEnrollmentTokens } from './postgres/1765756800000-enrollment-tokens';
import { LeaseStepFastCompletion1765843200000 as PostgresFastCompletion } from './postgres/1765843200000-lease-step-fast-completion';
import { WorkerCertificates1765929600000 as PostgresWorkerCertificates } from './postgres/1765929600000-worker-certificates';
import { Secrets1766023200000 as PostgresSecrets } from './postgres/1766023200000-secrets';
import { SessionCertificate1766016000000 as PostgresSessionCertificate } from './postgres/1766016000000-session-certificate';
import { ConsoleSessions1766448000000 as PostgresConsoleSessions } from './postgres/1766448000000-console-sessions';
import { Initial1764547200000 as SqliteInitial } from './sqlite/1764547200000-initial';
import { RevokedCertificates1764633600000 as SqliteRevoked } from './sqlite/1764633600000-revoked-certificates';
import { RunsAndLeases1764720000000 as SqliteRuns } from './sqlite/1764720000000-runs-and-leases';
import { ActivationAndLogs1764806400000 as SqliteActivation } from './sqlite/1764806400000-activation-and-logs';
import { SessionLastCall1764892800000 as SqliteLastCall } from './sqlite/1764892800000-session-last-call';
import { AdminViews1764979200000 as SqliteAdminViews } from './sqlite/1764979200000-admin-views';
import { WorkerRecoveryRequired1765411200000 as SqliteRecoveryRequired } from './sqlite/1765411200000-worker-recovery-required';
import { EnrollmentTokens1765756800000 as SqliteEnrollmentTokens } from './sqlite/1765756800000-enrollment-tokens';
import { WorkerCertificates1765929600000 as SqliteWorkerCertificates } from './sqlite/1765929600000-worker-certificates';
import { Secrets1766023200000 as SqliteSecrets } from './sqlite/1766023200000-secrets';
import { SessionCertificate1766016000000 as SqliteSessionCertificate } from './sqlite/1766016000000-session-certificate';
import { ConsoleSessions1766448000000 as SqliteConsoleSessions } from './sqlite/1766448000000-console-sessions';
import { LogStreams1765497600000 as LogStreams } from './log-streams';
import { AttemptsByWorker1766620800000 as AttemptsByWorker } from './attempts-by-worker';
import { LogRedaction1766707200000 as LogRedaction } from './log-redaction';
import {
  PostgresPlaneSecretKeys1767225600000 as PostgresPlaneSecretKeys,
  SqlitePlaneSecretKeys1767225600000 as SqlitePlaneSecretKeys,
} from './plane-secret-keys';
import { Bundles1766030400000 as PostgresBundles } from './postgres/1766030400000-bundles';
import { Bundles1766030400000 as SqliteBundles } from './sqlite/1766030400000-bundles';
import {
  PostgresEnvVars1767312000000 as PostgresEnvVars,
  SqliteEnvVars1767312000000 as SqliteEnvVars,
} from './env-vars';
import {
  PostgresTaskState1767398400000 as PostgresTaskState,
  SqliteTaskState1767398400000 as SqliteTaskState,
} from './task-state';
import {
  PostgresEnrollmentMayReplace1766880000000 as PostgresMayReplace,
  SqliteEnrollmentMayReplace1766880000000 as SqliteMayReplace,
} from './enrollment-may-replace';

/** Migrations per dialect, in order. Listed explicitly so tests and the built app load the same set. */
export const SQLITE_MIGRATIONS = [
  SqliteInitial,
  SqliteRevoked,
  SqliteRuns,
  SqliteActivation,
  SqliteLastCall,
  SqliteAdminViews,
  SqliteRecoveryRequired,
  LogStreams,
  SqliteEnrollmentTokens,
  SqliteWorkerCertificates,
  SqliteSessionCertificate,
  SqliteSecrets,
  SqliteBundles,
  SqliteConsoleSessions,
  AttemptsByWorker,
  LogRedaction,
  SqliteMayReplace,
  SqlitePlaneSecretKeys,
  SqliteEnvVars,
  SqliteTaskState,
];
export const POSTGRES_MIGRATIONS = [
  PostgresInitial,
  PostgresRevoked,
  PostgresRuns,
  PostgresActivation,
  PostgresLastCall,
  PostgresAdminViews,
  PostgresClaimFunction,
  PostgresLeaseSteps,
  PostgresQueueSignals,
  PostgresIndexOnlyPlans,
  PostgresRecoveryRequired,
  LogStreams,
  PostgresEnrollmentTokens,
  PostgresFastCompletion,
  PostgresWorkerCertificates,
  PostgresSessionCertificate,
  PostgresSecrets,
  PostgresBundles,
  PostgresConsoleSessions,
  AttemptsByWorker,
  LogRedaction,
  PostgresMayReplace,
  PostgresPlaneSecretKeys,
  PostgresEnvVars,
  PostgresTaskState,
];
