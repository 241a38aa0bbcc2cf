// the console session contract (ADR 0052) on both dialects: a session lives while its key does and
// until it is idle too long, reaches its lifetime or is revoked, all by the database clock.
import { createHash, randomBytes } from 'node:crypto';
import { NotFoundError } from '@ql/domain';
import { createIdGenerator } from '@ql/contracts';
import { SqlApiKeyRepository, SqlConsoleSessionRepository, SqlDatabase } from '@ql/persistence';
import { snapshotDatabase } from '../support/db-snapshot';
import { DispatchTarget } from '../support/dispatch-targets';

const IDLE = 60_000;
const MAX = 10 * 60_000;
const TOUCH = 5_000;
const digest = () => createHash('sha256').update(randomBytes(32)).digest('hex');

export function describeConsoleSessionContract(dialect: string, makeTarget: () => DispatchTarget): void {
  describe(`ConsoleSessionRepository contract (${dialect})`, () => {
    let target: DispatchTarget;
    let db: SqlDatabase;
    let repo: SqlConsoleSessionRepository;
    let keys: SqlApiKeyRepository;
    const ids = createIdGenerator();

    beforeAll(async () => {
      target = makeTarget();
      db = await target.open();
      repo = new SqlConsoleSessionRepository(db, ids);
      keys = new SqlApiKeyRepository(db, ids);
    });
    afterAll(async () => {
      await target.dispose();
    });

    const newKey = async (role: 'admin' | 'viewer' = 'viewer') =>
      keys.create(
        { id: ids.uuidV7(), name: `key-${role}`, role, digest: digest() },
        { actor: 'test', action: 'api_key.create', target: 'test' },
      );
    const signIn = async (apiKeyId: string, idleMs = IDLE, maxMs = MAX) => {
      const id = ids.uuidV7();
      const d = digest();
      const session = await repo.create(
        { id, digest: d, apiKeyId, idleMs, maxMs },
        { actor: apiKeyId, action: 'console_session.create', target: `console_session:${id}` },
      );
      return { session, digest: d };
    };
    const audit = { actor: 'admin', action: 'console_session.revoke', target: 'console_session:x' };

    it('a new session of an active key is live with its key; its times come from the database clock', async () => {
      const key = await newKey('admin');
      const start = target.clock.now();
      const { session, digest: d } = await signIn(key.id);
      expect(session).toMatchObject({
        apiKeyId: key.id,
        createdAt: start,
        lastSeenAt: start,
        idleMs: IDLE,
        expiresAt: start + MAX,
        revokedAt: null,
      });
      const found = await repo.findLive(d, TOUCH);
      expect(found?.session.id).toBe(session.id);
      expect(found?.key).toMatchObject({ id: key.id, role: 'admin', name: 'key-admin' });
      expect(await repo.findLive(digest(), TOUCH)).toBeNull();
    });

    it('a revoked key signs in to nothing: NotFoundError, nothing written', async () => {
      const key = await newKey();
      await keys.revoke(key.id, { actor: 'test', action: 'api_key.revoke', target: 'test' });
      const before = await snapshotDatabase(db);
      await expect(signIn(key.id)).rejects.toBeInstanceOf(NotFoundError);
      expect(await snapshotDatabase(db)).toEqual(before);
    });

    it('ends when idle for its limit; each use moves the limit on, written at most once per touch period', async () => {
      const key = await newKey();
      const { session, digest: d } = await signIn(key.id);
      target.clock.advance(TOUCH - 1);
      const early = await repo.findLive(d, TOUCH);
      expect(early?.session.lastSeenAt).toBe(session.lastSeenAt); // too soon to write
      target.clock.advance(IDLE - TOUCH); // IDLE - 1 after sign-in: still live, and now written
      const used = await repo.findLive(d, TOUCH);
      expect(used?.session.lastSeenAt).toBe(target.clock.now());
      target.clock.advance(IDLE - 1);
      expect(await repo.findLive(d, TOUCH)).not.toBeNull();
      target.clock.advance(IDLE);
      expect(await repo.findLive(d, TOUCH)).toBeNull();
    });

    it('ends at its lifetime however often it is used', async () => {
      const key = await newKey();
      const { digest: d } = await signIn(key.id, IDLE, 3 * TOUCH);
      for (let i = 0; i < 2; i++) {
        target.clock.advance(TOUCH);
        expect(await repo.findLive(d, TOUCH)).not.toBeNull();
      }
      target.clock.advance(TOUCH - 1);
      expect(await repo.findLive(d, TOUCH)).not.toBeNull();
      target.clock.advance(1);
      expect(await repo.findLive(d, TOUCH)).toBeNull();
    });

    it('revoking ends it at once (the first revocation stands); revoking its key ends it too', async () => {
      const key = await newKey();
      const a = await signIn(key.id);
      const b = await signIn(key.id);
      const revoked = await repo.revoke(a.session.id, audit);
      expect(revoked.revokedAt).toBe(target.clock.now());
      expect(await repo.findLive(a.digest, TOUCH)).toBeNull();
      expect(await repo.findLive(b.digest, TOUCH)).not.toBeNull();
      target.clock.advance(1000);
      expect((await repo.revoke(a.session.id, audit)).revokedAt).toBe(revoked.revokedAt);
      await keys.revoke(key.id, { actor: 'test', action: 'api_key.revoke', target: 'test' });
      expect(await repo.findLive(b.digest, TOUCH)).toBeNull();
      const listed = await repo.list(null, 1000);
      expect(listed.filter((s) => s.id === a.session.id || s.id === b.session.id).map((s) => s.live)).toEqual(
        [false, false],
      );
    });

    it('revoking an unknown session is NotFoundError and writes nothing', async () => {
      const before = await snapshotDatabase(db);
      await expect(repo.revoke(ids.uuidV7(), audit)).rejects.toBeInstanceOf(NotFoundError);
      expect(await snapshotDatabase(db)).toEqual(before);
    });

    it('lists by id after a cursor, saying which are live; stores only digests', async () => {
      const key = await newKey();
      const first = await signIn(key.id);
      const second = await signIn(key.id);
      const page = await repo.list(first.session.id, 1);
      expect(page).toEqual([expect.objectContaining({ id: second.session.id, live: true })]);
      const rows = await db.many<{ digest: string }>('SELECT digest FROM console_sessions');
      expect(rows.every((r) => /^[0-9a-f]{64}$/.test(r.digest))).toBe(true);
    });
  });
}
