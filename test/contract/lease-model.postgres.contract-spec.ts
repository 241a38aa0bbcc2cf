import { PostgresDatabase } from '@ql/persistence';
import { createPostgresDatabase } from '../support/databases';
import { ManualClock } from '../support/fixtures';
import { describeLeaseModel } from './lease-model.contract';

describeLeaseModel('postgres', () => {
  let database: Awaited<ReturnType<typeof createPostgresDatabase>> | undefined;
  const clock = new ManualClock();
  const opened: PostgresDatabase[] = [];
  const open = async () => {
    database ??= await createPostgresDatabase();
    const db = await PostgresDatabase.open({ url: database.url, poolSize: 4, clock }, false);
    opened.push(db);
    return db;
  };
  return {
    clock,
    open,
    openSecond: open,
    dispose: async () => {
      for (const db of opened) await db.close().catch(() => undefined);
      await database?.drop();
    },
  };
});
