import { statSync } from 'node:fs';
import { createIdGenerator } from '@ql/contracts';
import { SqlWorkerSessionRepository, SqliteDatabase } from '@ql/persistence';
import { createSqliteFile } from '../support/databases';
import { newSessionId, snapshot } from '../support/fixtures';

describe('SQLite write-ahead log under a heartbeat-only load', () => {
  it('is checkpointed automatically: 3,000 heartbeats leave the WAL near its 1,000-page checkpoint size', async () => {
    const file = createSqliteFile();
    const db = await SqliteDatabase.open({ path: file.path }, { now: () => Date.now() });
    try {
      const repo = new SqlWorkerSessionRepository(db, createIdGenerator());
      const sessionId = newSessionId();
      let { version } = (
        await repo.register({ workerId: 'w', sessionId, snapshot: snapshot(), leaseMs: 60_000 })
      ).session;
      const pageSize = db.native.pragma('page_size', { simple: true }) as number;
      for (let i = 0; i < 3000; i++) {
        const next = await repo.heartbeat({
          workerId: 'w',
          sessionId,
          fence: { generation: 1, expectedVersion: version },
          leaseMs: 60_000,
          availableSlots: 1,
        });
        version = next.version;
      }
      // Each commit appends at least one page; without checkpoints the WAL would hold ≥ 3,000 pages.
      const walPages = statSync(`${file.path}-wal`).size / pageSize;
      expect(walPages).toBeLessThan(1_500);
    } finally {
      await db.close();
      file.remove();
    }
  });
});
