/**
 * A process that appends to a journal as fast as it can, for journal-crash.spec.ts: runs go from
 * `accepted` to `completion_acknowledged`, and after each step has resolved (it is durable) the
 * process writes `<offer id> <state>` to the ack file with a synchronous write, then counts the run
 * on stdout. The test SIGKILLs it at some point and checks what the journal kept.
 *
 * Usage: node -r swc-register.js journal-appender.ts <journal folder> <ack file>
 */
import { openSync, writeSync } from 'node:fs';
import { WorkerJournal } from '../src/journal/worker-journal';
import { driveNewRecord } from './journal-fixtures';

/** Small bounds, so prunes and compactions happen every few runs and a kill lands in them too. */
export const APPENDER_LIMITS = { maxRecords: 16, compaction: { minBytes: 16_384, ratio: 2 } } as const;

async function main(dir: string, ackFile: string): Promise<void> {
  const journal = new WorkerJournal({ dir, workerId: 'appender', ...APPENDER_LIMITS });
  const acks = openSync(ackFile, 'a', 0o600);
  await journal.open();
  for (let run = 1; ; run++) {
    await driveNewRecord(journal, 'completion_acknowledged', (r) =>
      writeSync(acks, `${r.offerId} ${r.state}\n`),
    );
    process.stdout.write(`${run}\n`);
    // A turn of the event loop between runs, as a worker's network calls give: compaction runs there.
    await new Promise((resolve) => setImmediate(resolve));
  }
}

if (require.main === module) {
  const [dir, ackFile] = process.argv.slice(2);
  main(dir!, ackFile!).catch((error: unknown) => {
    console.error(error);
    process.exit(1);
  });
}
