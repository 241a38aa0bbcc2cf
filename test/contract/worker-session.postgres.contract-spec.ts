import { PostgresDatabase } from '@ql/persistence';
import { createPostgresDatabase } from '../support/databases';
import { describeWorkerSessionContract } from './worker-session.contract';

describeWorkerSessionContract('postgres', () => {
  let database: Awaited<ReturnType<typeof createPostgresDatabase>> | undefined;
  const opened: PostgresDatabase[] = [];
  const open = async () => {
    database ??= await createPostgresDatabase();
    // The contract asserts order and fencing, not latency: "200 racing replacements" queue for 8
    // connections and, on a loaded machine, wait longer than the 30 s default pool wait
    // (ADR 0039). That bound has its own test (postgres-pool-wait.contract-spec.ts).
    const db = await PostgresDatabase.open({ url: database.url, poolSize: 8, poolWaitMs: 300_000 }, false);
    opened.push(db);
    return db;
  };
  return {
    open,
    openSecond: open,
    dispose: async () => {
      for (const db of opened) await db.close().catch(() => undefined);
      await database?.drop();
    },
  };
});
