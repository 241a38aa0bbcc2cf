// Secrets (issue 19 items 5–8, ADR 0050) on both dialects: sealed at rest, metadata only out, the
// tasks that map them, rotation and the start check, delivery to a live lease's holder only, and the
// control plane's redaction of stored output.
import { randomBytes } from 'node:crypto';
import {
  ConflictError,
  FencedError,
  SecretCipher,
  SecretKeyError,
  UnavailableError,
  ValidationError,
  parseTaskSpec,
} from '@ql/domain';
import { SqlActivationRepository, SqlAuditRepository, SqlSecretRepository } from '@ql/persistence';
import { AUDIT, DispatchFixture, DispatchTarget, RUN_LEASE, expectFence, offered } from './dispatch.contract';

const KEY_A = randomBytes(32);
const KEY_B = randomBytes(32);
const COOKIE_1 = 'pt_key=AAAA-cookie-one;pt_pin=jd_1;';
const COOKIE_2 = 'pt_key=BBBB-cookie-two;pt_pin=jd_2;';

/** What a refused call threw, or null. */
async function refusal(p: Promise<unknown>): Promise<unknown> {
  return p.then(
    () => null,
    (e: unknown) => e,
  );
}

export function describeSecretsContract(dialect: string, makeTarget: () => DispatchTarget): void {
  describe(`secrets (${dialect})`, () => {
    let target: DispatchTarget;
    let f: DispatchFixture;
    let secrets: SqlSecretRepository;
    let acts: SqlActivationRepository;
    let audit: SqlAuditRepository;
    const cipherA = new SecretCipher('a', KEY_A);
    let n = 0;
    const name = (stem: string) => `${stem}-${++n}`;

    beforeAll(async () => {
      target = makeTarget();
      f = new DispatchFixture(await target.open());
      secrets = new SqlSecretRepository(f.db, f.ids, cipherA);
      acts = new SqlActivationRepository(f.db, { redaction: secrets.redaction });
      audit = new SqlAuditRepository(f.db);
    });
    afterAll(async () => {
      await target.dispose();
    });

    const put = (secret: string, value: string, repo = secrets) =>
      repo.put(secret, value, { actor: 'key-1', action: 'secret.put', target: `secret:${secret}` });
    const rows = () =>
      f.db.many<Record<string, unknown>>('SELECT name, key_id, nonce, ciphertext FROM secrets ORDER BY name');

    it('stores a value sealed (never its plaintext), answers metadata only and audits without the value', async () => {
      const secret = name('jd-cookie');
      const created = await put(secret, COOKIE_1);
      expect(created).toMatchObject({ created: true, record: { name: secret, keyId: 'a', usedBy: [] } });
      expect(JSON.stringify(created)).not.toContain(COOKIE_1);
      const replaced = await put(secret, COOKIE_2);
      expect(replaced.created).toBe(false);
      expect(replaced.record.updatedAt).toBeGreaterThanOrEqual(replaced.record.createdAt);
      const stored = (await rows()).find((r) => r.name === secret)!;
      expect(stored.key_id).toBe('a');
      expect(JSON.stringify(await rows())).not.toMatch(/cookie-one|cookie-two/);
      expect(
        cipherA.open(secret, {
          keyId: 'a',
          nonce: String(stored.nonce),
          ciphertext: String(stored.ciphertext),
        }),
      ).toBe(COOKIE_2);
      const entries = (await audit.list(50)).filter((e) => e.target === `secret:${secret}`);
      expect(entries.map((e) => e.action).sort()).toEqual(['secret.create', 'secret.replace']);
      expect(JSON.stringify(entries)).not.toMatch(/cookie-one|cookie-two/);
      expect(JSON.stringify(await secrets.list({ limit: 100 }))).not.toMatch(/cookie-one|cookie-two/);
    });

    it('seals each value under its own nonce, bound to its name: a ciphertext moved to another name does not open', async () => {
      const one = name('same');
      const two = name('same');
      await put(one, COOKIE_1);
      await put(two, COOKIE_1);
      const [r1, r2] = (await rows()).filter((r) => r.name === one || r.name === two);
      expect(r1!.nonce).not.toBe(r2!.nonce);
      expect(r1!.ciphertext).not.toBe(r2!.ciphertext);
      const moved = { keyId: 'a', nonce: String(r1!.nonce), ciphertext: String(r1!.ciphertext) };
      expect(() => cipherA.open(two, moved)).toThrow(SecretKeyError);
    });

    it('without a key, a value is refused as secrets_disabled and nothing is written', async () => {
      const keyless = new SqlSecretRepository(f.db, f.ids, undefined);
      const before = await rows();
      const error = await refusal(put(name('nokey'), 'v', keyless));
      expect(error).toBeInstanceOf(UnavailableError);
      expect((error as UnavailableError).reason).toBe('secrets_disabled');
      expect(await rows()).toEqual(before);
    });

    it('a task may map only existing secrets; the list names the tasks that map one; a mapped secret cannot be deleted', async () => {
      const secret = name('cookie');
      await put(secret, COOKIE_1);
      const missing = name('missing');
      const tasksBefore = await f.count('tasks');
      const error = await refusal(f.task({ secretEnv: { JD_COOKIE: `${secret}&${missing}` } }));
      expect(error).toBeInstanceOf(ValidationError);
      expect((error as ValidationError).rule).toBe('unknown_secret');
      expect(error instanceof Error && error.message).toContain(missing);
      expect(await f.count('tasks')).toBe(tasksBefore);

      const task = await f.task({ secretEnv: { JD_COOKIE: secret } });
      expect((await secrets.find(secret))!.usedBy).toEqual([task.id]);
      const inUse = await refusal(secrets.delete(secret, AUDIT));
      expect(inUse).toBeInstanceOf(ConflictError);
      expect((inUse as ConflictError).reason).toBe('secret_in_use');
      expect(await secrets.find(secret)).not.toBeNull();

      // A new revision without the mapping frees it; the earlier revision keeps its names.
      const { changed } = await f.tasks.update(
        task.id,
        parseTaskSpec({ name: task.name, command: 'echo hello', runtime: 'shell' }),
        AUDIT,
      );
      expect(changed).toBe(true);
      expect((await secrets.find(secret))!.usedBy).toEqual([]);
      expect((await secrets.delete(secret, AUDIT)).name).toBe(secret);
      expect(await secrets.find(secret)).toBeNull();
      expect(
        (await audit.list(20)).some((e) => e.action === 'secret.delete' && e.target === `secret:${secret}`),
      ).toBe(true);
    });

    it('a deleted task frees the secrets it mapped', async () => {
      const secret = name('freed');
      await put(secret, COOKIE_1);
      const task = await f.task({ secretEnv: { TOKEN: secret } });
      await f.tasks.delete(task.id, AUDIT);
      expect((await secrets.find(secret))!.usedBy).toEqual([]);
    });

    it('rotation re-encrypts every value to the current key; the start check names a key that is missing or wrong', async () => {
      const own = await target.openSecond();
      const names = [name('rot'), name('rot'), name('rot')];
      for (const [i, s] of names.entries()) await put(s, `value-${i}-${COOKIE_1}`);
      const rotated = new SqlSecretRepository(
        own,
        f.ids,
        new SecretCipher('b', KEY_B, new Map([['a', KEY_A]])),
      );
      const result = await rotated.rotate(AUDIT);
      expect(result.reencrypted).toBeGreaterThanOrEqual(names.length);
      expect((await rows()).every((r) => r.key_id === 'b')).toBe(true);
      expect(await rotated.rotate(AUDIT)).toMatchObject({ reencrypted: 0 });

      // Only the new key: everything opens.
      const onlyB = new SqlSecretRepository(own, f.ids, new SecretCipher('b', KEY_B));
      expect(await onlyB.checkKeys()).toEqual({ keyIds: ['b'] });
      // The old key alone: the stored id is unknown.
      const stale = await refusal(new SqlSecretRepository(own, f.ids, cipherA).checkKeys());
      expect(stale).toBeInstanceOf(SecretKeyError);
      expect(stale).toMatchObject({ keyId: 'b', reason: 'key_unknown' });
      // Another key under the same id: wrong.
      const wrong = await refusal(
        new SqlSecretRepository(own, f.ids, new SecretCipher('b', KEY_A)).checkKeys(),
      );
      expect(wrong).toMatchObject({ keyId: 'b', reason: 'key_wrong' });
      // No key at all with secrets stored.
      const none = await refusal(new SqlSecretRepository(own, f.ids, undefined).checkKeys());
      expect(none).toMatchObject({ reason: 'secrets_key_missing' });
      // Back to key a for the tests after this one.
      const back = new SqlSecretRepository(own, f.ids, new SecretCipher('a', KEY_A, new Map([['b', KEY_B]])));
      await back.rotate(AUDIT);
      expect((await rows()).every((r) => r.key_id === 'a')).toBe(true);
    });

    /** A claimed run of a task that maps JD_COOKIE to two secrets joined by `&`. */
    async function mappedRun(map = true) {
      const one = name('c1');
      const two = name('c2');
      await put(one, COOKIE_1);
      await put(two, COOKIE_2);
      const c = await f.claimedRun(
        name(`holder-${dialect}`),
        map ? { secretEnv: { JD_COOKIE: `${one}&${two}` } } : {},
      );
      return { ...c, one, two };
    }

    it('delivers the mapped values, joined, to the holder of a live lease after starting; audited by name only', async () => {
      const c = await mappedRun();
      await expectFence(secrets.deliver(c.fence), 'lease', 'attempt_not_starting');
      await acts.starting(c.fence);
      const delivered = await secrets.deliver(c.fence);
      expect(delivered).toEqual({
        attemptId: c.offer.attempt.id,
        env: { JD_COOKIE: `${COOKIE_1}&${COOKIE_2}` },
      });
      await acts.running({ ...c.fence, executorHandle: 'local-process:7' });
      expect((await secrets.deliver(c.fence)).env).toEqual(delivered.env);
      const rowsOf = (await audit.list(50)).filter(
        (e) => e.action === 'secret.deliver' && e.target === `attempt:${c.offer.attempt.id}`,
      );
      expect(rowsOf).toHaveLength(2);
      expect(rowsOf[0]!.detail).toEqual({
        runId: c.run.id,
        secrets: [c.one, c.two].sort(),
        env: ['JD_COOKIE'],
      });
      expect(JSON.stringify(rowsOf)).not.toMatch(/cookie-one|cookie-two/);
    });

    it('a run whose revision maps nothing gets nothing', async () => {
      const c = await mappedRun(false);
      await acts.starting(c.fence);
      expect((await secrets.deliver(c.fence)).env).toEqual({});
    });

    it('refuses another token, another worker, a replaced session, a released or expired lease: nothing served', async () => {
      const c = await mappedRun();
      await acts.starting(c.fence);
      await expectFence(
        secrets.deliver({ ...c.fence, tokenDigest: 'f'.repeat(64) }),
        'lease',
        'lease_token_mismatch',
      );
      const other = await f.worker(name('other'));
      await expectFence(
        secrets.deliver({
          ...c.fence,
          workerId: other.workerId,
          sessionId: other.sessionId,
          fence: other.fence,
        }),
        'lease',
        'lease_token_mismatch',
      );
      const successor = await f.successor(c.fence);
      await expectFence(secrets.deliver(c.fence), 'session', 'session_replaced');
      // The worker's new session cannot fetch for its predecessor's lease either (holder only).
      await expectFence(secrets.deliver(successor), 'lease', 'lease_token_mismatch');

      // Released before it started, and completed after it ran: both leases are over.
      const d = await mappedRun();
      await f.leases.release({ ...d.fence, leaseMs: RUN_LEASE });
      await expectFence(secrets.deliver(d.fence), 'lease', 'lease_not_active');
      // Its run went back to the queue: another worker takes it, so later claims get their own runs.
      expect(offered(await f.pull(await f.worker(name('sink')))).run.id).toBe(d.run.id);
      const done = await mappedRun();
      await acts.starting(done.fence);
      await acts.running({ ...done.fence, executorHandle: 'local-process:8' });
      await acts.complete({ ...done.fence, outcome: 'succeeded', exitCode: 0, errorSummary: null });
      await expectFence(secrets.deliver(done.fence), 'lease', 'lease_not_active');

      const e = await mappedRun();
      await acts.starting(e.fence);
      target.clock.advance(RUN_LEASE + 1);
      const expired = await refusal(secrets.deliver(e.fence));
      expect(expired).toBeInstanceOf(FencedError);
      expect((expired as FencedError).reason).toBe('lease_expired');
    });

    it('a mapped secret that is gone is refused as unavailable, naming it', async () => {
      const c = await mappedRun();
      await acts.starting(c.fence);
      // The task is deleted (freeing the names), then the secret: the pinned revision still maps it.
      await f.tasks.delete(c.run.taskId, AUDIT);
      await secrets.delete(c.two, AUDIT);
      const error = await refusal(secrets.deliver(c.fence));
      expect(error).toBeInstanceOf(UnavailableError);
      expect(error).toMatchObject({ reason: 'secret_missing' });
      expect(String((error as Error).message)).toContain(c.two);
    });

    it('values over 96 KiB in all are refused as secrets_too_large: nothing served', async () => {
      const big = [name('big'), name('big'), name('big')];
      for (const [i, s] of big.entries()) await put(s, `${i}`.repeat(33 * 1024));
      const c = await f.claimedRun(name(`big-${dialect}`), {
        secretEnv: { A: big[0], B: `${big[1]}&${big[2]}` },
      });
      await acts.starting(c.fence);
      const error = await refusal(secrets.deliver(c.fence));
      expect(error).toBeInstanceOf(UnavailableError);
      expect(error).toMatchObject({ reason: 'secrets_too_large' });
    });

    it('stores output with every mapped value, and each joined value, as *** (again after the worker)', async () => {
      const c = await mappedRun();
      await acts.starting(c.fence);
      const text = `one ${COOKIE_1} joined ${COOKIE_1}&${COOKIE_2} end\n`;
      await acts.appendLog({ ...c.fence, seq: 0, stream: 'stdout', text });
      // The same chunk again is a replay of what was stored.
      expect(await acts.appendLog({ ...c.fence, seq: 0, stream: 'stdout', text })).toMatchObject({
        outcome: 'replayed',
      });
      const page = await acts.readLogs(c.run.id, { after: 0, limit: 10 });
      expect(page!.entries.map((e) => e.raw)).toEqual(['one *** joined *** end\n']);
      const raw = await f.db.many<{ text: string }>('SELECT text FROM run_logs WHERE run_id = :id', {
        id: c.run.id,
      });
      expect(JSON.stringify(raw)).not.toMatch(/cookie-one|cookie-two/);
    });
  });
}
