import { statSync } from 'node:fs';
import { createIdGenerator } from '@ql/contracts';
import { SqlWorkerSessionRepository, SqliteDatabase } from '@ql/persistence';
import { ConfigError, loadConfig } from '../../apps/control-plane/src/config/config';
import { openCore } from '../../apps/control-plane/src/core/core';
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

describe("SQLite page cache bound (QL_SQLITE_CACHE_MIB, ADR 0053)", () => {
  const openPlaneCore = async (env: Record<string, string>) => {
    const file = createSqliteFile();
    const core = await openCore(loadConfig({ QL_DATABASE_URL: `sqlite:${file.path}`, ...env }));
    return {
      db: core.db as SqliteDatabase,
      close: async () => {
        await core.queueSignals.close();
        await core.db.close();
        file.remove();
      },
    };
  };

  it.each([
    ['the default', {}, 4 * 1024],
    ['QL_SQLITE_CACHE_MIB=12', { QL_SQLITE_CACHE_MIB: '12' }, 12 * 1024],
  ])("%s is applied to the plane's connection as PRAGMA cache_size = -KiB", async (_, env, kib) => {
    const plane = await openPlaneCore(env);
    try {
      expect(plane.db.native.pragma('cache_size', { simple: true })).toBe(-kib);
      expect(plane.db.pragmas()).toMatchObject({ cacheKiB: kib, mmapSize: 0, walAutocheckpoint: 1000 });
    } finally {
      await plane.close();
    }
  });

  it('without the setting the driver keeps its compiled default, larger than the bound', async () => {
    const file = createSqliteFile();
    const db = await SqliteDatabase.open({ path: file.path }, { now: () => Date.now() });
    try {
      expect(db.pragmas().cacheKiB).toBe(16_000);
    } finally {
      await db.close();
      file.remove();
    }
  });

  it.each(['0', '1025', '4.5', '-4', 'lots'])('QL_SQLITE_CACHE_MIB=%s is a configuration error', (raw) => {
    expect(() => loadConfig({ QL_SQLITE_CACHE_MIB: raw })).toThrow(ConfigError);
    expect(() => loadConfig({ QL_SQLITE_CACHE_MIB: raw })).toThrow(
      `QL_SQLITE_CACHE_MIB=${raw} must be an integer in 1..1024`,
    );
  });
});
