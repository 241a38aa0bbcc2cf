import { existsSync } from 'node:fs';
import type { WorkerConfig } from '../config/worker-config';
import { JournalLockedError } from './journal-lock';
import type { JournalRecord } from './journal-record';
import { WorkerJournal } from './worker-journal';

/** Exit codes of `journal …` (the worker's own where they mean the same). */
export const JOURNAL_COMMAND_EXIT = { ok: 0, usage: 2, locked: 4 } as const;

export const JOURNAL_USAGE = `usage: worker journal list
       worker journal resolve <offer id>
       worker journal resolve --all
Run on the worker's host, with the worker's environment, while the worker is stopped (it holds the
journal lock). "list" shows the records that need recovery; "resolve" removes them once you checked
that no process of their attempt still runs (each carries QL_ATTEMPT_ID=<attempt id>, unless it
cleared its environment: look for what the run's command starts).`;

interface Out {
  out(line: string): void;
  err(line: string): void;
}

/**
 * `journal list | resolve <offer id> | resolve --all` (ADR 0029): the operator's way to clear the
 * records that keep a worker from pulling. It opens the journal like the worker does, so it holds the
 * journal's kernel lock while it works and refuses to run beside a live worker.
 */
export async function journalCommand(
  args: readonly string[],
  config: WorkerConfig,
  io: Out,
): Promise<number> {
  const [verb, target, ...rest] = args;
  const resolveAll = verb === 'resolve' && target === '--all';
  if (
    !(verb === 'list' && target === undefined) &&
    !(verb === 'resolve' && target !== undefined && rest.length === 0)
  ) {
    io.err(JOURNAL_USAGE);
    return JOURNAL_COMMAND_EXIT.usage;
  }
  if (!existsSync(config.journalDir)) {
    // Opening would create it: a mistyped QL_WORKER_JOURNAL_DIR or QL_WORKER_ID must change nothing.
    io.err(`no journal folder ${config.journalDir}; check QL_WORKER_JOURNAL_DIR and QL_WORKER_ID`);
    return JOURNAL_COMMAND_EXIT.usage;
  }
  const journal = new WorkerJournal({
    dir: config.journalDir,
    workerId: config.workerId,
    maxRecords: config.journalMaxRecords,
  });
  try {
    await journal.open();
  } catch (error) {
    if (!(error instanceof JournalLockedError)) throw error;
    io.err(`${error.message}\nstop the worker first: the journal command needs the journal for itself`);
    return JOURNAL_COMMAND_EXIT.locked;
  }
  try {
    const pending: JournalRecord[] = [];
    for await (const page of journal.pages())
      pending.push(...page.filter((r) => r.state === 'recovery_required'));
    if (verb === 'list') {
      for (const r of pending) io.out(describe(r));
      io.out(
        `${pending.length} journal record${pending.length === 1 ? '' : 's'} need${pending.length === 1 ? 's' : ''} recovery in ${config.journalDir}`,
      );
      return JOURNAL_COMMAND_EXIT.ok;
    }
    const chosen = resolveAll ? pending : pending.filter((r) => r.offerId === target);
    if (!resolveAll && chosen.length === 0) {
      io.err(`no journal record ${target} needs recovery in ${config.journalDir} (see: journal list)`);
      return JOURNAL_COMMAND_EXIT.usage;
    }
    for (const r of chosen) {
      await journal.resolveRecovery(r.offerId);
      io.out(`resolved ${describe(r)}`);
    }
    io.out(
      `${chosen.length} resolved; the worker pulls again at its next start if nothing else needs recovery`,
    );
    return JOURNAL_COMMAND_EXIT.ok;
  } finally {
    await journal.close();
  }
}

function describe(r: JournalRecord): string {
  const group = r.process ? ` pid ${r.process.pid} pgid ${r.process.pgid}` : '';
  return `${r.offerId} run ${r.runId} attempt ${r.attemptId} reason ${r.recoveryReason ?? 'unknown'}${group} since ${r.updatedAt}`;
}
