import { createIdGenerator } from '@ql/contracts';
import { LocalProcessExecutor, LocalRun } from '../src/executor/local-process.executor';
import type { JournalState } from '../src/journal/journal-states';

const ids = createIdGenerator();

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
