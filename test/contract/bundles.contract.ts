// Issue 19 items 1-3 (ADR 0051): the bundle store on both dialects — content-addressed puts, chunked
// reads of the BLOB / bytea, deletes refused while pinned, task writes refused for unknown digests, and
// the worker's fetch fenced like every lease call and served only for an attempt that pins the bundle.
import { createHash, randomBytes } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import { ConflictError, NotFoundError, ValidationError, parseTaskSpec } from '@ql/domain';
import { writeTar } from '@ql/contracts';
import { SqlActivationRepository, SqlBundleRepository } from '@ql/persistence';
import { snapshotDatabase } from '../support/db-snapshot';
import { AUDIT, DispatchFixture, DispatchTarget, RUN_LEASE, expectFence } from './dispatch.contract';

/** A real `.tar.gz` of one file with random content (so each call makes a new digest). */
export function sampleBundle(size = 300_000) {
  const content = gzipSync(
    writeTar([{ path: 'main.js', type: 'file', mode: 0o644, data: randomBytes(size) }]),
  );
  return {
    digest: createHash('sha256').update(content).digest('hex'),
    content,
    files: 1,
    unpackedBytes: size,
  };
}

export function describeBundlesContract(dialect: string, makeTarget: () => DispatchTarget): void {
  describe(`bundle store (${dialect})`, () => {
    let target: DispatchTarget;
    let f: DispatchFixture;
    let bundles: SqlBundleRepository;
    let acts: SqlActivationRepository;
    let n = 0;
    const audit = (action: string, digest: string) => ({
      actor: 'admin-key',
      action,
      target: `bundle:${digest}`,
    });
    const put = async (b = sampleBundle()) => {
      await bundles.put({ ...b, createdBy: 'admin-key' }, audit('bundle.push', b.digest));
      return b;
    };
    const pinning = (digest: string, workdir = '.') => ({
      bundle: { digest, workdir },
      command: 'node main.js',
    });

    beforeAll(async () => {
      target = makeTarget();
      f = new DispatchFixture(await target.open());
      bundles = new SqlBundleRepository(f.db, f.ids);
      acts = new SqlActivationRepository(f.db);
    });
    afterAll(async () => {
      await target.dispose();
    });

    it('stores the bytes once under their digest; chunked reads give them back exactly', async () => {
      const b = sampleBundle();
      const audits = await f.count('audit_log');
      const first = await bundles.put({ ...b, createdBy: 'admin-key' }, audit('bundle.push', b.digest));
      expect(first).toMatchObject({
        created: true,
        bundle: {
          digest: b.digest,
          sizeBytes: b.content.length,
          files: 1,
          unpackedBytes: 300_000,
          createdBy: 'admin-key',
        },
      });
      const again = await bundles.put({ ...b, createdBy: 'other' }, audit('bundle.push', b.digest));
      expect(again).toEqual({ created: false, bundle: first.bundle });
      expect(await f.count('audit_log')).toBe(audits + 1);
      const parts: Buffer[] = [];
      for (let offset = 0; offset < b.content.length; offset += 100_000)
        parts.push((await bundles.readChunk(b.digest, offset, 100_000))!);
      expect(Buffer.concat(parts).equals(b.content)).toBe(true);
      expect(await bundles.readChunk('0'.repeat(64), 0, 10)).toBeNull();
      expect(await bundles.find(b.digest)).toEqual(first.bundle);
      const listed = await bundles.list({ limit: 200 });
      expect(listed.map((x) => x.digest)).toContain(b.digest);
      const after = await bundles.list({ after: b.digest, limit: 200 });
      expect(after.every((x) => x.digest > b.digest)).toBe(true);
    });

    it('a task pinning an unknown digest is refused and writes nothing; a known one pins it on the revision', async () => {
      const before = await snapshotDatabase(f.db);
      const error = await f.task(pinning('f'.repeat(64))).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ValidationError);
      expect(error).toMatchObject({ field: 'bundle.digest', rule: 'unknown_bundle' });
      expect(await snapshotDatabase(f.db)).toEqual(before);
      const b = await put();
      const task = await f.task(pinning(b.digest, 'scripts'));
      expect(task.spec.bundle).toEqual({ digest: b.digest, workdir: 'scripts' });
      const row = await f.db.one<{ bundle_digest: string }>(
        'SELECT bundle_digest FROM task_revisions WHERE task_id = :id AND revision = 1',
        { id: task.id },
      );
      expect(row!.bundle_digest).toBe(b.digest);
    });

    it('delete is refused while a live task pins it, then while an unfinished run of an older revision does', async () => {
      const b = await put();
      const task = await f.task(pinning(b.digest));
      const [run] = await f.queue(task.id, 1);
      const pinnedError = () =>
        bundles.delete(b.digest, audit('bundle.delete', b.digest)).catch((e: unknown) => e);
      const before = await snapshotDatabase(f.db);
      expect(await pinnedError()).toMatchObject({ reason: 'bundle_pinned' });
      expect(await pinnedError()).toBeInstanceOf(ConflictError);
      expect(await snapshotDatabase(f.db)).toEqual(before);
      // A new revision without the bundle: the queued run still pins revision 1.
      const other = await put();
      const spec = parseTaskSpec({
        name: task.name,
        command: 'node main.js',
        runtime: 'shell',
        bundle: { digest: other.digest },
      });
      const updated = await f.tasks.update(task.id, spec, AUDIT);
      expect(updated).toMatchObject({ changed: true, task: { revision: 2 } });
      expect(await pinnedError()).toMatchObject({ reason: 'bundle_pinned' });
      // The run ends (cancelled while queued): nothing pins it any more.
      await f.db.run(`UPDATE runs SET status = 'cancelled' WHERE id = :id`, { id: run!.id });
      const deleted = await bundles.delete(b.digest, audit('bundle.delete', b.digest));
      expect(deleted.digest).toBe(b.digest);
      expect(await bundles.find(b.digest)).toBeNull();
      expect(await bundles.readChunk(b.digest, 0, 10)).toBeNull();
      const entry = await f.db.one<{ action: string; target: string }>(
        `SELECT action, target FROM audit_log WHERE target = :t ORDER BY at DESC, id DESC LIMIT 1`,
        { t: `bundle:${b.digest}` },
      );
      expect(entry).toEqual({ action: 'bundle.delete', target: `bundle:${b.digest}` });
      await expect(bundles.delete(b.digest, AUDIT)).rejects.toBeInstanceOf(NotFoundError);
    });

    describe('the worker fetch (authorizeFetch)', () => {
      async function held() {
        const b = await put();
        const c = await f.claimedRun(`bundle-${dialect}-${++n}`, pinning(b.digest));
        return { ...c, b };
      }

      it('serves the holder of a live lease whose attempt pins the bundle while it is starting: not before, not once running (issue 27 item 7)', async () => {
        const { fence, b } = await held();
        await expectFence(bundles.authorizeFetch(fence, b.digest), 'lease', 'attempt_not_starting');
        await acts.starting(fence);
        expect(await bundles.authorizeFetch(fence, b.digest)).toMatchObject({ digest: b.digest });
        await acts.running({ ...fence, executorHandle: 'pid:4242' });
        await expectFence(bundles.authorizeFetch(fence, b.digest), 'lease', 'attempt_not_starting');
      });

      it('refuses a bundle the attempt does not pin, even one that exists (404, nothing told)', async () => {
        const { fence } = await held();
        const other = await put();
        await expect(bundles.authorizeFetch(fence, other.digest)).rejects.toBeInstanceOf(NotFoundError);
        await expect(bundles.authorizeFetch(fence, '0'.repeat(64))).rejects.toBeInstanceOf(NotFoundError);
        const plain = await f.claimedRun(`plain-${dialect}-${++n}`);
        await expect(bundles.authorizeFetch(plain.fence, other.digest)).rejects.toBeInstanceOf(NotFoundError);
      });

      it('refuses another worker, a wrong token and a replaced session', async () => {
        const { fence, b } = await held();
        const stranger = await f.worker(`stranger-${dialect}-${++n}`);
        await expectFence(
          bundles.authorizeFetch(
            { ...fence, workerId: stranger.workerId, sessionId: stranger.sessionId, fence: stranger.fence },
            b.digest,
          ),
          'lease',
          'lease_token_mismatch',
        );
        await expectFence(
          bundles.authorizeFetch({ ...fence, tokenDigest: 'a'.repeat(64) }, b.digest),
          'lease',
          'lease_token_mismatch',
        );
        await f.successor(fence); // the worker registered again: the old session is replaced
        await expectFence(bundles.authorizeFetch(fence, b.digest), 'session', 'session_replaced');
      });

      it('refuses a released lease', async () => {
        const { fence, b } = await held();
        await f.leases.release({ ...fence, leaseMs: RUN_LEASE });
        await expectFence(bundles.authorizeFetch(fence, b.digest), 'lease', 'lease_not_active');
      });

      it('refuses an expired lease (its term passed, the sweeper not run yet)', async () => {
        const { fence, b } = await held();
        target.clock.advance(RUN_LEASE);
        await expectFence(bundles.authorizeFetch(fence, b.digest), 'lease', 'lease_expired');
      });
    });
  });
}
