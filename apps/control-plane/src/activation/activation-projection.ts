import { ActivationResult } from '@ql/domain';
import { ActivationSnapshot, RunActivationResponse, buildActivationResponse } from '@ql/contracts';

const iso = (ms: number | null) => (ms === null ? undefined : new Date(ms).toISOString());

/**
 * The repository's result as `qinglong/remote-run-activation@v1`: epoch ms become ISO times, null
 * becomes absent; a deadline comes with the sweeper's grace after it (ADR 0028). The contract's parser checks it; a corrupt projection is a 503, never sent.
 */
export function projectActivation(
  { status, snapshot: s }: ActivationResult,
  deadlineGraceMs: number,
): RunActivationResponse {
  const optional = {
    deadlineAt: iso(s.deadlineAt),
    deadlineGraceMs: s.deadlineAt === null ? undefined : deadlineGraceMs,
    startedAt: iso(s.startedAt),
    finishedAt: iso(s.finishedAt),
    executorHandle: s.executorHandle ?? undefined,
    errorCode: s.errorCode ?? undefined,
  };
  const snapshot: ActivationSnapshot = {
    runId: s.runId,
    attemptId: s.attemptId,
    runStatus: s.runStatus,
    attemptStatus: s.attemptStatus,
    leaseVersion: s.leaseVersion,
    leaseGeneration: s.leaseGeneration,
    callbackSequence: s.callbackSequence,
    ...Object.fromEntries(Object.entries(optional).filter(([, value]) => value !== undefined)),
  };
  return buildActivationResponse(status, snapshot);
}
