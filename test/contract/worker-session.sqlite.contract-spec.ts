import { SqliteDatabase } from '@ql/persistence';
import { createSqliteFile } from '../support/databases';
import { describeWorkerSessionContract } from './worker-session.contract';

describeWorkerSessionContract('sqlite', () => {
  const file = createSqliteFile();
  const opened: SqliteDatabase[] = [];
  const clock = { now: () => Date.now() };
  return {
    open: async () => {
      const db = await SqliteDatabase.open({ path: file.path }, clock);
      opened.push(db);
      return db;
    },
    openSecond: () => SqliteDatabase.open({ path: file.path }, clock, false),
    dispose: async () => {
      for (const db of opened) await db.close();
      file.remove();
    },
  };
});
