import { createIdGenerator } from '@ql/contracts';
import { randomBytes } from 'node:crypto';
import { LocalProcessExecutor, LocalRun } from '../src/executor/local-process.executor';
import type { JournalState } from '../src/journal/journal-states';
import type { JournalRecord } from '../src/journal/journal-record';
import type { AcceptedOffer, WorkerJournal } from '../src/journal/worker-journal';

const ids = createIdGenerator();

/** A fresh offer as the worker accepts it: new ids, generation 1, a random lease token. */
export const newOffer = (specDigest = 'a'.repeat(64)): AcceptedOffer => ({
  offerId: ids.uuidV7(),
  runId: ids.uuidV7(),
  attemptId: ids.uuidV7(),
  leaseGeneration: 1,
  leaseToken: randomBytes(32).toString('base64url'),
  specDigest,
});

/** The transitions that take a fresh `accepted` record to each state, along the one table. */
export const PATH_TO: Readonly<Record<JournalState, readonly JournalState[]>> = {
  accepted: [],
  starting_acknowledged: ['starting_acknowledged'],
  launching: ['starting_acknowledged', 'launching'],
  started: ['starting_acknowledged', 'launching', 'started'],
  running_acknowledged: ['starting_acknowledged', 'launching', 'started', 'running_acknowledged'],
  completion_acknowledged: [
    'starting_acknowledged',
    'launching',
    'started',
    'running_acknowledged',
    'completion_acknowledged',
  ],
  start_failed: ['starting_acknowledged', 'start_failed'],
  recovery_required: ['starting_acknowledged', 'launching', 'recovery_required'],
};

/** The process `driveNewRecord` records at `started`. */
export const DRIVEN_PROCESS = { pid: 4242, pgid: 4242, bootId: 'boot-1' } as const;
export const SUCCEEDED = { status: 'succeeded', exitCode: 0, errorCode: null } as const;

/**
 * Accepts a fresh offer and drives its record along the table to `state`, through real writes (what
 * each state needs: the process, a succeeded outcome, `launch_interrupted`); `onStep` hears each one.
 */
export async function driveNewRecord(
  journal: WorkerJournal,
  state: JournalState,
  onStep?: (record: JournalRecord) => void,
): Promise<JournalRecord> {
  let r = await journal.accept(newOffer());
  onStep?.(r);
  for (const to of PATH_TO[state]) {
    r = await journal.transition(r.offerId, to, {
      ...(to === 'started' ? { process: DRIVEN_PROCESS } : {}),
      ...(to === 'completion_acknowledged' ? { outcome: SUCCEEDED } : {}),
      ...(to === 'recovery_required' ? { recoveryReason: 'launch_interrupted' } : {}),
    });
    onStep?.(r);
  }
  return r;
}

/**
 * A run whose worker "crashed": nobody will cancel it; its group keeps running with a grandchild,
 * marked with `attemptId` like every run. Resolves once the command has printed.
 */
export async function orphanRun(
  workRoot: string,
  attemptId: string,
  command = 'sleep 30 & echo started; wait',
): Promise<LocalRun> {
  const executor = new LocalProcessExecutor({ workRoot, killGraceMs: 300, outputCapBytes: 4096 });
  let started!: () => void;
  const output = new Promise<void>((resolve) => (started = resolve));
  const run = await executor.launch({
    offerId: ids.uuidV7(),
    attemptId,
    runtime: 'shell',
    command,
    env: {},
    timeoutMs: 60_000,
    onOutput: () => started(),
  });
  await output;
  return run;
}
