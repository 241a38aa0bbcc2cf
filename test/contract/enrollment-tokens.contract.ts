// the enrollment token contract (ADR 0045 §1) on both dialects: create, list, revoke, and every
// outcome of consume, each refusal writing nothing (the route audits it), and the races on one token.
import { createHash } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';
import {
  EnrollmentRefusal,
  EnrollmentRefusedError,
  EnrollmentTokenSpec,
  NotFoundError,
  ValidationError,
} from '@ql/domain';
import { createIdGenerator } from '@ql/contracts';
import { SqlAuditRepository, SqlDatabase, SqlEnrollmentTokenRepository } from '@ql/persistence';
import { snapshotDatabase } from '../support/db-snapshot';
import { DispatchTarget } from '../support/dispatch-targets';
import { announcingTransactions, pausedAfter, untilLockWaiter } from '../support/paused-database';

const HOUR = 3600;
const forWorker = (workerId: string, ttlSeconds = HOUR): EnrollmentTokenSpec => ({
  workerId,
  pattern: null,
  maxWorkers: 1,
  ttlSeconds,
  mayReplace: false,
});
const forPattern = (pattern: string, maxWorkers: number, ttlSeconds = HOUR): EnrollmentTokenSpec => ({
  workerId: null,
  pattern,
  maxWorkers,
  ttlSeconds,
  mayReplace: false,
});

/** The refusal a consume rejected with, or 'enrolled'. */
async function outcomeOf(consume: Promise<unknown>): Promise<EnrollmentRefusal | 'enrolled'> {
  try {
    await consume;
    return 'enrolled';
  } catch (error) {
    if (error instanceof EnrollmentRefusedError) return error.code;
    throw error;
  }
}

export function describeEnrollmentTokenContract(dialect: string, makeTarget: () => DispatchTarget): void {
  describe(`EnrollmentTokenRepository contract (${dialect})`, () => {
    let target: DispatchTarget;
    let db: SqlDatabase;
    let second: SqlDatabase;
    let repo: SqlEnrollmentTokenRepository;
    let audit: SqlAuditRepository;
    const ids = createIdGenerator();
    let n = 0;
    const prefix = () => `w${++n}`;

    beforeAll(async () => {
      target = makeTarget();
      db = await target.open();
      second = await target.openSecond();
      repo = new SqlEnrollmentTokenRepository(db, ids);
      audit = new SqlAuditRepository(db);
    });
    afterAll(async () => {
      await target.dispose();
    });

    const create = (spec: EnrollmentTokenSpec) => {
      const id = ids.uuidV7();
      return repo.create(
        { id, spec, createdBy: 'key-1' },
        { actor: 'key-1', action: 'enrollment_token.create', target: `enrollment_token:${id}` },
      );
    };
    const now = () => target.clock.now();
    const uses = async (tokenId: string) =>
      (
        await db.many<{ worker_id: string }>(
          'SELECT worker_id FROM enrollment_token_uses WHERE token_id = :tokenId ORDER BY worker_id',
          { tokenId },
        )
      ).map((r) => r.worker_id);

    /** Tables whose rows changed between two snapshots. */
    const changedTables = (before: Record<string, unknown[]>, after: Record<string, unknown[]>) =>
      Object.keys(after).filter((table) => !isDeepStrictEqual(after[table], before[table]));

    /**
     * `consume` refuses with `code` and writes nothing: the refusal's audit row is the enrollment
     * route's, bounded per source address (issue 27 item 9).
     */
    async function expectRefused(workerId: string, token: string, code: EnrollmentRefusal, at = now()) {
      const before = await snapshotDatabase(db);
      expect(await outcomeOf(repo.consume(workerId, token, at))).toBe(code);
      expect(changedTables(before, await snapshotDatabase(db))).toEqual([]);
    }

    it('create returns the token once and stores only its SHA-256; the audit row names the id', async () => {
      const before = await snapshotDatabase(db);
      const { token, record } = await create(forWorker('router-1'));
      expect(token).toMatch(/^qlet_[A-Za-z0-9_-]{43}$/);
      expect(record).toEqual({
        id: expect.any(String),
        workerId: 'router-1',
        pattern: null,
        maxWorkers: 1,
        uses: 0,
        status: 'active',
        expiresAt: now() + HOUR * 1000,
        revokedAt: null,
        mayReplace: false,
        createdBy: 'key-1',
        createdAt: now(),
      });
      const after = await snapshotDatabase(db);
      expect(changedTables(before, after).sort()).toEqual(['audit_log', 'enrollment_tokens']);
      const text = JSON.stringify(after);
      expect(text).not.toContain(token);
      expect(text).toContain(createHash('sha256').update(token).digest('hex'));
      expect((await audit.list(1))[0]).toMatchObject({ target: `enrollment_token:${record.id}` });
    });

    it('a worker-id token enrolls that worker once: the use and its audit row in one commit; again is used', async () => {
      const { token, record } = await create(forWorker('router-2'));
      const before = await snapshotDatabase(db);
      expect(await repo.consume('router-2', token, now())).toEqual({
        tokenId: record.id,
        workerId: 'router-2',
        at: now(),
      });
      const after = await snapshotDatabase(db);
      expect(changedTables(before, after).sort()).toEqual(['audit_log', 'enrollment_token_uses']);
      expect((await audit.list(1))[0]).toMatchObject({
        actor: 'worker:router-2',
        action: 'enrollment_token.use',
        target: `enrollment_token:${record.id}`,
        detail: { workerId: 'router-2' },
      });
      expect(JSON.stringify(after.audit_log)).not.toContain(token);
      await expectRefused('router-2', token, 'enrollment_token_used');
    });

    it('each refusal writes nothing: unknown, malformed, wrong worker, expired, revoked', async () => {
      const { token } = await create(forWorker('router-3', 60));
      await expectRefused('router-3', `qlet_${'A'.repeat(43)}`, 'enrollment_token_invalid');
      await expectRefused('router-3', 'not-a-token', 'enrollment_token_invalid');
      await expectRefused('router-3', token.slice(0, -1), 'enrollment_token_invalid');
      await expectRefused('router-4', token, 'enrollment_token_wrong_worker');
      // Expired at its expiry instant, not a millisecond later.
      await expectRefused('router-3', token, 'enrollment_token_invalid', now() + 60_000);
      const revoked = await create(forWorker('router-5'));
      await repo.revoke(revoked.record.id, {
        actor: 'key-1',
        action: 'enrollment_token.revoke',
        target: 't',
      });
      await expectRefused('router-5', revoked.token, 'enrollment_token_invalid');
      // Still good a millisecond before it expires.
      expect(await outcomeOf(repo.consume('router-3', token, now() + 59_999))).toBe('enrolled');
    });

    it('a pattern token enrolls matching ids up to its count, each once; a prefix is not a match', async () => {
      const p = prefix();
      const { token, record } = await create(forPattern(`${p}-router-*`, 3));
      for (const id of ['2', '1'])
        expect(await outcomeOf(repo.consume(`${p}-router-${id}`, token, now()))).toBe('enrolled');
      await expectRefused(`${p}-router-1`, token, 'enrollment_token_used');
      await expectRefused(`${p}-router-`, token, 'enrollment_token_wrong_worker');
      await expectRefused(`${p}-routers-1`, token, 'enrollment_token_wrong_worker');
      await expectRefused(`x${p}-router-1`, token, 'enrollment_token_wrong_worker');
      expect(await outcomeOf(repo.consume(`${p}-router-abc-9`, token, now()))).toBe('enrolled');
      await expectRefused(`${p}-router-4`, token, 'enrollment_token_exhausted');
      // Already enrolled beats exhausted: the worker is told the truth about its own id.
      await expectRefused(`${p}-router-2`, token, 'enrollment_token_used');
      expect(await uses(record.id)).toEqual([`${p}-router-1`, `${p}-router-2`, `${p}-router-abc-9`]);
      const suffix = await create(forPattern(`*-${p}-edge`, 1));
      expect(await outcomeOf(repo.consume(`a-${p}-edge`, suffix.token, now()))).toBe('enrolled');
    });

    it('a malformed worker id is a validation error and writes nothing, not even an audit row', async () => {
      const { token } = await create(forWorker('router-6'));
      const before = await snapshotDatabase(db);
      for (const bad of ['Router-6', '-x', '', 'a'.repeat(64)])
        await expect(repo.consume(bad, token, now())).rejects.toBeInstanceOf(ValidationError);
      expect(await snapshotDatabase(db)).toEqual(before);
    });

    it('list: keyset pages by id, metadata only, status by the database clock', async () => {
      const p = prefix();
      const active = await create(forWorker(`${p}-a`));
      const used = await create(forWorker(`${p}-b`));
      await repo.consume(`${p}-b`, used.token, now());
      const revoked = await create(forPattern(`${p}-*`, 5));
      await repo.revoke(revoked.record.id, {
        actor: 'key-1',
        action: 'enrollment_token.revoke',
        target: 't',
      });
      const short = await create(forWorker(`${p}-c`, 60));
      const all = await repo.list({ afterId: active.record.id, limit: 200 });
      const ours = [active, used, revoked, short].map((t) => t.record.id);
      expect(all.map((t) => t.id)).toEqual(ours.slice(1));
      expect(all.map((t) => [t.status, t.uses])).toEqual([
        ['exhausted', 1],
        ['revoked', 0],
        ['active', 0],
      ]);
      expect(JSON.stringify(all)).not.toMatch(/qlet_|digest|[0-9a-f]{64}/);
      target.clock.advance(60_000);
      try {
        const page = await repo.list({ afterId: revoked.record.id, limit: 1 });
        expect(page).toEqual([expect.objectContaining({ id: short.record.id, status: 'expired' })]);
      } finally {
        target.clock.advance(-60_000);
      }
      const first = await repo.list({ limit: 2 });
      const next = await repo.list({ afterId: first[1]!.id, limit: 2 });
      expect(next[0]!.id > first[1]!.id).toBe(true);
    });

    it('revoke is idempotent (the first time stays) and audited; an unknown id is not found and writes nothing', async () => {
      const { record } = await create(forWorker('router-7'));
      const revoke = () =>
        repo.revoke(record.id, {
          actor: 'key-2',
          action: 'enrollment_token.revoke',
          target: `enrollment_token:${record.id}`,
        });
      const first = await revoke();
      expect(first).toMatchObject({ status: 'revoked', revokedAt: now() });
      target.clock.advance(1000);
      try {
        expect((await revoke()).revokedAt).toBe(first.revokedAt);
      } finally {
        target.clock.advance(-1000);
      }
      expect((await audit.list(1))[0]).toMatchObject({ actor: 'key-2', action: 'enrollment_token.revoke' });
      const before = await snapshotDatabase(db);
      await expect(
        repo.revoke(ids.uuidV7(), { actor: 'key-2', action: 'enrollment_token.revoke', target: 'x' }),
      ).rejects.toBeInstanceOf(NotFoundError);
      expect(await snapshotDatabase(db)).toEqual(before);
    });

    describe('races on one token, through two connections', () => {
      it('two ids at once on a count-1 pattern token: the second waits for the first and is exhausted', async () => {
        const p = prefix();
        const { token, record } = await create(forPattern(`${p}-*`, 1));
        let entered!: () => void;
        const secondEntered = new Promise<void>((resolve) => (entered = resolve));
        const other = new SqlEnrollmentTokenRepository(announcingTransactions(second, entered), ids);
        let b: Promise<EnrollmentRefusal | 'enrolled'> | undefined;
        // A pauses once it has read the uses of the token; B runs meanwhile and is stopped by the
        // token's row lock (PostgreSQL) or the write lock A's transaction holds (SQLite), or is not.
        const between = async () => {
          let settled = false;
          b = outcomeOf(other.consume(`${p}-b`, token, now())).finally(() => (settled = true));
          const blocked = async () => {
            await secondEntered;
            if (dialect === 'postgres') await untilLockWaiter(db, () => settled);
          };
          await Promise.race([b, blocked()]);
        };
        const first = new SqlEnrollmentTokenRepository(
          pausedAfter(db, /count\(\*\) FROM enrollment_token_uses/, between),
          ids,
        );
        const a = await outcomeOf(first.consume(`${p}-a`, token, now()));
        expect([a, await b!]).toEqual(['enrolled', 'enrollment_token_exhausted']);
        expect(await uses(record.id)).toEqual([`${p}-a`]);
      });

      it('a burst of ids on a count-3 token, half through each connection: exactly three enroll', async () => {
        const p = prefix();
        const { token, record } = await create(forPattern(`${p}-*`, 3));
        const repos = [repo, new SqlEnrollmentTokenRepository(second, ids)];
        const outcomes = await Promise.all(
          Array.from({ length: 12 }, (_, i) => outcomeOf(repos[i % 2]!.consume(`${p}-${i}`, token, now()))),
        );
        expect(outcomes.filter((o) => o === 'enrolled')).toHaveLength(3);
        expect(outcomes.filter((o) => o === 'enrollment_token_exhausted')).toHaveLength(9);
        expect(await uses(record.id)).toHaveLength(3);
      });

      it('one id sent six times at once on a count-5 token: enrolled once, used five times', async () => {
        const p = prefix();
        const { token, record } = await create(forPattern(`${p}-*`, 5));
        const repos = [repo, new SqlEnrollmentTokenRepository(second, ids)];
        const outcomes = await Promise.all(
          Array.from({ length: 6 }, (_, i) => outcomeOf(repos[i % 2]!.consume(`${p}-same`, token, now()))),
        );
        expect(outcomes.sort()).toEqual(['enrolled', ...Array(5).fill('enrollment_token_used')]);
        expect(await uses(record.id)).toEqual([`${p}-same`]);
      });
    });
  });
}
