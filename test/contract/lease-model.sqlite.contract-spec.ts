import { SqliteDatabase } from '@ql/persistence';
import { createSqliteFile } from '../support/databases';
import { ManualClock } from '../support/fixtures';
import { describeLeaseModel } from './lease-model.contract';

describeLeaseModel('sqlite', () => {
  const file = createSqliteFile();
  const clock = new ManualClock();
  const opened: SqliteDatabase[] = [];
  const open = async (migrate: boolean) => {
    const db = await SqliteDatabase.open({ path: file.path }, clock, migrate);
    opened.push(db);
    return db;
  };
  return {
    clock,
    open: () => open(true),
    openSecond: () => open(false),
    dispose: async () => {
      for (const db of opened) await db.close().catch(() => undefined);
      file.remove();
    },
  };
});
