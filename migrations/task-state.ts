import type { MigrationInterface, QueryRunner } from 'typeorm';
import { taskSearchText } from '@ql/domain';

/**
 * Issue 31 item 3: a task's state beside its revisions — `enabled` (a disabled task keeps its
 * schedule and is skipped), `pinned` (listed first) — and `search_text`, the name and command folded
 * (NFKC, lower case: Unicode-aware on both dialects, unlike SQLite's ASCII-only `lower`), so one
 * `LIKE` finds `京东` and `JD` alike. Existing tasks are enabled, not pinned, and folded here.
 */
function migration(flag: (on: boolean) => string, placeholder: (n: number) => string) {
  return class implements MigrationInterface {
    name = 'TaskState1767398400000';

    async up(q: QueryRunner): Promise<void> {
      await q.query(`ALTER TABLE tasks ADD COLUMN enabled ${flag(true)}`);
      await q.query(`ALTER TABLE tasks ADD COLUMN pinned ${flag(false)}`);
      await q.query(`ALTER TABLE tasks ADD COLUMN search_text TEXT NOT NULL DEFAULT ''`);
      const rows = (await q.query('SELECT id, spec_json FROM tasks')) as { id: string; spec_json: string }[];
      for (const row of rows)
        await q.query(`UPDATE tasks SET search_text = ${placeholder(1)} WHERE id = ${placeholder(2)}`, [
          taskSearchText(JSON.parse(row.spec_json) as { name: string; command: string }),
          row.id,
        ]);
    }

    async down(q: QueryRunner): Promise<void> {
      for (const column of ['search_text', 'pinned', 'enabled'])
        await q.query(`ALTER TABLE tasks DROP COLUMN ${column}`);
    }
  };
}

export const SqliteTaskState1767398400000 = migration(
  (on) => `INTEGER NOT NULL DEFAULT ${on ? 1 : 0}`,
  () => '?',
);
export const PostgresTaskState1767398400000 = migration(
  (on) => `boolean NOT NULL DEFAULT ${on}`,
  (n) => `$${n}`,
);
