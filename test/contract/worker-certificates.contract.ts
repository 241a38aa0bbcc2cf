// the worker certificate contract (ADR 0045 §4) on both dialects: enrollment records the current
// certificate in the token's transaction, renewing supersedes, a replay answers the same certificate,
// a fork and a revoked certificate are refused with nothing written but the audit row, revoking a
// worker revokes all its certificates, and two renewals of one certificate make one current.
import { randomBytes } from 'node:crypto';
import { EnrollmentRefusedError, IssuedWorkerCertificate, RenewalOutcome, RenewalRefusal } from '@ql/domain';
import { createIdGenerator } from '@ql/contracts';
import {
  SqlAuditRepository,
  SqlCertificateRevocationRepository,
  SqlDatabase,
  SqlEnrollmentTokenRepository,
  SqlWorkerCertificateRepository,
  SqlWorkerSessionRepository,
} from '@ql/persistence';
import { changedTables, snapshotDatabase } from '../support/db-snapshot';
import { newSessionId, snapshot } from '../support/fixtures';
import { DispatchTarget } from '../support/dispatch-targets';
import { announcingTransactions, pausedAfter, untilLockWaiter } from '../support/paused-database';

const hex = (bytes: number) => randomBytes(bytes).toString('hex');

export function describeWorkerCertificateContract(dialect: string, makeTarget: () => DispatchTarget): void {
  describe(`WorkerCertificateRepository contract (${dialect})`, () => {
    let target: DispatchTarget;
    let db: SqlDatabase;
    let second: SqlDatabase;
    let repo: SqlWorkerCertificateRepository;
    let tokens: SqlEnrollmentTokenRepository;
    let audit: SqlAuditRepository;
    let revocations: SqlCertificateRevocationRepository;
    const ids = createIdGenerator();
    let n = 0;
    const workerId = () => `host-${++n}`;

    beforeAll(async () => {
      target = makeTarget();
      db = await target.open();
      second = await target.openSecond();
      repo = new SqlWorkerCertificateRepository(db, ids);
      tokens = new SqlEnrollmentTokenRepository(db, ids);
      audit = new SqlAuditRepository(db);
      revocations = new SqlCertificateRevocationRepository(db, ids);
    });
    afterAll(async () => {
      await target.dispose();
    });

    const now = () => target.clock.now();
    /** What the issuer would sign: the repository stores it as given. */
    const issued = (worker: string, publicKeyDigest = hex(32)): IssuedWorkerCertificate => ({
      fingerprint: hex(32),
      workerId: worker,
      serial: hex(16),
      publicKeyDigest,
      certificatePem: `-----BEGIN CERTIFICATE-----\n${randomBytes(48).toString('base64')}\n-----END CERTIFICATE-----\n`,
      issuedAt: now(),
      notAfter: now() + 86_400_000,
    });
    const newToken = async (worker: string) => {
      const id = ids.uuidV7();
      const { token } = await tokens.create(
        {
          id,
          spec: { workerId: worker, pattern: null, maxWorkers: 1, ttlSeconds: 3600, mayReplace: false },
          createdBy: 'key-1',
        },
        { actor: 'key-1', action: 'enrollment_token.create', target: `enrollment_token:${id}` },
      );
      return token;
    };
    const enroll = async (worker: string, certificate = issued(worker)) => {
      const use = await tokens.consume(worker, await newToken(worker), now(), async () => certificate);
      return use.certificate!;
    };
    const renewAudit = (worker: string) => ({
      renewed: { actor: `worker:${worker}`, action: 'worker.certificate_renew', target: `worker:${worker}` },
      refused: (code: RenewalRefusal, current: string | null) => ({
        actor: `worker:${worker}`,
        action: code === 'certificate_superseded' ? 'worker.certificate_fork' : 'worker.certificate_refuse',
        target: `worker:${worker}`,
        detail: { code, current },
      }),
    });
    const renew = (
      worker: string,
      presented: string,
      next: IssuedWorkerCertificate,
      on: SqlWorkerCertificateRepository = repo,
    ) =>
      on.renew(
        { workerId: worker, presented, publicKeyDigest: next.publicKeyDigest },
        async () => next,
        renewAudit(worker),
      );

    it("enrolling records the signed certificate as the worker's current one, in the token's transaction", async () => {
      const worker = workerId();
      const token = await newToken(worker);
      const certificate = issued(worker);
      const before = await snapshotDatabase(db);
      const use = await tokens.consume(worker, token, now(), async () => certificate);
      expect(use.certificate).toEqual({
        ...certificate,
        renewedFrom: null,
        supersededBy: null,
        revokedAt: null,
      });
      expect(changedTables(before, await snapshotDatabase(db))).toEqual([
        'audit_log',
        'enrollment_token_uses',
        'worker_certificates',
      ]);
      expect(await repo.current(worker)).toEqual(use.certificate);
      expect(await repo.find(certificate.fingerprint)).toEqual(use.certificate);
    });

    it('a signing failure writes nothing at all: the token stays unused and enrolls afterwards', async () => {
      const worker = workerId();
      const token = await newToken(worker);
      const before = await snapshotDatabase(db);
      const failure = new Error('the issuer key is gone');
      await expect(
        tokens.consume(worker, token, now(), async () => {
          throw failure;
        }),
      ).rejects.toBe(failure);
      expect(await snapshotDatabase(db)).toEqual(before);
      const use = await tokens.consume(worker, token, now(), async () => issued(worker));
      expect(use.certificate?.workerId).toBe(worker);
    });

    it('a refused token never asks for a signature: nothing is written (the route audits it)', async () => {
      const worker = workerId();
      const token = await newToken(worker);
      await enrollWith(token, worker);
      const before = await snapshotDatabase(db);
      const sign = jest.fn(async () => issued(worker));
      await expect(tokens.consume(worker, token, now(), sign)).rejects.toBeInstanceOf(EnrollmentRefusedError);
      expect(sign).not.toHaveBeenCalled();
      expect(changedTables(before, await snapshotDatabase(db))).toEqual([]);
    });
    const enrollWith = (token: string, worker: string) =>
      tokens.consume(worker, token, now(), async () => issued(worker));

    it('enrolling again (a new token) supersedes the current certificate: one current per worker', async () => {
      const worker = workerId();
      const first = await enroll(worker);
      const again = await enroll(worker);
      expect(await repo.find(first.fingerprint)).toMatchObject({ supersededBy: again.fingerprint });
      expect((await repo.current(worker))?.fingerprint).toBe(again.fingerprint);
      expect((await repo.listForWorker(worker, 10)).map((c) => c.fingerprint).sort()).toEqual(
        [first.fingerprint, again.fingerprint].sort(),
      );
    });

    it('renewing with the current certificate supersedes it, with its audit row, in one commit', async () => {
      const worker = workerId();
      const first = await enroll(worker);
      const next = issued(worker);
      const before = await snapshotDatabase(db);
      const outcome = await renew(worker, first.fingerprint, next);
      expect(outcome).toEqual({
        kind: 'renewed',
        certificate: { ...next, renewedFrom: first.fingerprint, supersededBy: null, revokedAt: null },
      });
      expect(changedTables(before, await snapshotDatabase(db))).toEqual(['audit_log', 'worker_certificates']);
      expect(await repo.find(first.fingerprint)).toMatchObject({ supersededBy: next.fingerprint });
      expect((await audit.list(1))[0]).toMatchObject({ action: 'worker.certificate_renew' });
    });

    it('the same public key again with the superseded certificate is a replay: the same answer, nothing written', async () => {
      const worker = workerId();
      const first = await enroll(worker);
      const next = issued(worker);
      await renew(worker, first.fingerprint, next);
      const before = await snapshotDatabase(db);
      const sign = jest.fn(async () => issued(worker, next.publicKeyDigest));
      const outcome = await repo.renew(
        { workerId: worker, presented: first.fingerprint, publicKeyDigest: next.publicKeyDigest },
        sign,
        renewAudit(worker),
      );
      expect(outcome).toMatchObject({ kind: 'replayed', certificate: { fingerprint: next.fingerprint } });
      expect(sign).not.toHaveBeenCalled();
      expect(await snapshotDatabase(db)).toEqual(before);
    });

    it('a superseded certificate with another key is a fork: refused, the audit row names both certificates', async () => {
      const worker = workerId();
      const first = await enroll(worker);
      const copy = issued(worker);
      await renew(worker, first.fingerprint, copy); // the copy on a second machine renewed first
      const before = await snapshotDatabase(db);
      const sign = jest.fn(async () => issued(worker));
      const outcome = await repo.renew(
        { workerId: worker, presented: first.fingerprint, publicKeyDigest: hex(32) },
        sign,
        renewAudit(worker),
      );
      expect(outcome).toEqual({ kind: 'refused', code: 'certificate_superseded', current: copy.fingerprint });
      expect(sign).not.toHaveBeenCalled();
      expect(changedTables(before, await snapshotDatabase(db))).toEqual(['audit_log']);
      expect((await audit.list(1))[0]).toMatchObject({
        action: 'worker.certificate_fork',
        detail: { code: 'certificate_superseded', current: copy.fingerprint },
      });
      // Once the replay's certificate is itself renewed, the old key is no replay either.
      const third = issued(worker);
      await renew(worker, copy.fingerprint, third);
      expect(await renew(worker, first.fingerprint, issued(worker, copy.publicKeyDigest))).toMatchObject({
        kind: 'refused',
        code: 'certificate_superseded',
      });
    });

    it('a certificate not issued here, or issued to another worker, does not renew: certificate_unknown', async () => {
      const worker = workerId();
      const other = await enroll(workerId());
      for (const presented of [hex(32), other.fingerprint]) {
        const before = await snapshotDatabase(db);
        expect(await renew(worker, presented, issued(worker))).toEqual({
          kind: 'refused',
          code: 'certificate_unknown',
          current: null,
        });
        expect(changedTables(before, await snapshotDatabase(db))).toEqual(['audit_log']);
      }
    });

    it('revoking a worker revokes every certificate it was issued, into the revocation list; they renew no more', async () => {
      const worker = workerId();
      const first = await enroll(worker);
      const next = issued(worker);
      await renew(worker, first.fingerprint, next);
      const bystander = await enroll(workerId());
      const revokeAudit = { actor: 'key-1', action: 'worker.revoke', target: `worker:${worker}` };
      const revoked = await repo.revokeWorker(worker, 'stolen laptop', revokeAudit);
      expect(revoked).toEqual([first.fingerprint, next.fingerprint].sort());
      for (const fingerprint of revoked) {
        expect((await revocations.lookUp(fingerprint)).revoked).toBe(true);
        expect((await repo.find(fingerprint))?.revokedAt).toBe(now());
      }
      expect((await revocations.lookUp(bystander.fingerprint)).revoked).toBe(false);
      expect(await repo.current(worker)).toBeNull();
      expect((await audit.list(1))[0]).toMatchObject({
        action: 'worker.revoke',
        detail: { fingerprints: [first.fingerprint, next.fingerprint].sort() },
      });
      expect(await renew(worker, next.fingerprint, issued(worker))).toMatchObject({
        code: 'certificate_revoked',
      });
      expect(await repo.revokeWorker(worker, null, revokeAudit)).toEqual([]);
      // A new enrollment after the revocation is the worker's current certificate again.
      const back = await enroll(worker);
      expect((await repo.current(worker))?.fingerprint).toBe(back.fingerprint);
    });

    it('two replicas renewing one certificate at once: one renews, the other is a fork', async () => {
      const worker = workerId();
      const first = await enroll(worker);
      const [a, b] = [issued(worker), issued(worker)];
      let entered!: () => void;
      const secondEntered = new Promise<void>((resolve) => (entered = resolve));
      const other = new SqlWorkerCertificateRepository(announcingTransactions(second, entered), ids);
      let outcomeB: Promise<RenewalOutcome> | undefined;
      // A pauses once it has read the presented certificate; B renews it meanwhile and is stopped by
      // the worker's lock (PostgreSQL) or the write lock A's transaction holds (SQLite), or is not.
      const between = async () => {
        let settled = false;
        outcomeB = renew(worker, first.fingerprint, b, other).finally(() => (settled = true));
        const blocked = async () => {
          await secondEntered;
          if (dialect === 'postgres') await untilLockWaiter(db, () => settled);
        };
        await Promise.race([outcomeB, blocked()]);
      };
      const paused = new SqlWorkerCertificateRepository(
        pausedAfter(db, /FROM worker_certificates WHERE fingerprint/, between),
        ids,
      );
      const outcomeA = await renew(worker, first.fingerprint, a, paused);
      expect(outcomeA).toMatchObject({ kind: 'renewed', certificate: { fingerprint: a.fingerprint } });
      expect(await outcomeB).toEqual({
        kind: 'refused',
        code: 'certificate_superseded',
        current: a.fingerprint,
      });
      const rows = await db.many<{ fingerprint: string }>(
        'SELECT fingerprint FROM worker_certificates WHERE worker_id = :worker AND superseded_by IS NULL AND revoked_at IS NULL',
        { worker },
      );
      expect(rows).toEqual([{ fingerprint: a.fingerprint }]);
    });

    it("the admin worker views carry the current certificate's life and fingerprint: none, enrolled, renewed, revoked", async () => {
      const sessions = new SqlWorkerSessionRepository(db, ids);
      const worker = workerId();
      await sessions.register({
        workerId: worker,
        sessionId: newSessionId(),
        snapshot: snapshot(),
        leaseMs: 3_600_000,
      });
      const views = async () => {
        const listed = await sessions.listWorkers({ afterWorkerId: worker.slice(0, -1), limit: 200 });
        return [
          (await sessions.findWorker(worker))?.certificate,
          listed.find((w) => w.workerId === worker)?.certificate,
        ];
      };
      expect(await views()).toEqual([null, null]);
      const first = await enroll(worker);
      const life = (c: { issuedAt: number; notAfter: number; fingerprint: string }) => ({
        issuedAt: c.issuedAt,
        notAfter: c.notAfter,
        fingerprint: c.fingerprint,
      });
      expect(await views()).toEqual([life(first), life(first)]);
      target.clock.advance(60_000);
      const next = issued(worker);
      await renew(worker, first.fingerprint, next);
      expect(await views()).toEqual([life(next), life(next)]);
      // The admin writes answer with it too (their UPDATE … RETURNING reads the same columns).
      const move = { actor: 'key-1', action: 'worker.drain', target: `worker:${worker}` };
      expect((await sessions.drainWorker(worker, move)).certificate).toEqual(life(next));
      await repo.revokeWorker(worker, null, {
        actor: 'key-1',
        action: 'worker.revoke',
        target: `worker:${worker}`,
      });
      expect(await views()).toEqual([null, null]);
      expect(
        (await sessions.resumeWorker(worker, { ...move, action: 'worker.resume' })).certificate,
      ).toBeNull();
    });

    it('the table keeps one current certificate per worker even against a write that forgets to supersede', async () => {
      const worker = workerId();
      await enroll(worker);
      const stray = issued(worker);
      const refusal = await db
        .run(
          `INSERT INTO worker_certificates (fingerprint, worker_id, serial, public_key_digest, certificate_pem, issued_at, not_after)
           VALUES (:fingerprint, :workerId, :serial, :digest, 'x', {now}, {now})`,
          {
            fingerprint: stray.fingerprint,
            workerId: worker,
            serial: stray.serial,
            digest: stray.publicKeyDigest,
          },
        )
        .then(
          (changed) => ({ inserted: changed }),
          (error: unknown) => ({ refused: String((error as Error)?.message ?? error) }),
        );
      expect(refusal).toEqual({ refused: expect.stringMatching(/unique/i) });
    });
  });
}
