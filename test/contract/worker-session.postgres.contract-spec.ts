import { PostgresDatabase } from '@ql/persistence';
import { createPostgresDatabase } from '../support/databases';
import { describeWorkerSessionContract } from './worker-session.contract';

describeWorkerSessionContract('postgres', () => {
  let database: Awaited<ReturnType<typeof createPostgresDatabase>> | undefined;
  const opened: PostgresDatabase[] = [];
  const open = async () => {
    database ??= await createPostgresDatabase();
    const db = await PostgresDatabase.open({ url: database.url, poolSize: 8 }, false);
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
