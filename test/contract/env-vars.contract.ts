// Global env vars (issue 31 item 2, ADR 0061) on both dialects: plain and secret rows, a secret one's
// value sealed as the secret `env.<NAME>`, versions, the order, the limits that keep every run's spec
// within its own, deletes, the reserved secret names, and every refusal writing nothing.
import { randomBytes } from 'node:crypto';
import {
  ConflictError,
  ENV_VAR_LIMITS,
  NewEnvVar,
  NotFoundError,
  SecretCipher,
  UnavailableError,
  ValidationError,
  parseNewEnvVar,
  parseTaskSpec,
} from '@ql/domain';
import {
  SqlActivationRepository,
  SqlAuditRepository,
  SqlEnvVarRepository,
  SqlSecretRepository,
} from '@ql/persistence';
import { snapshotDatabase } from '../support/db-snapshot';
import { AUDIT, DispatchFixture, DispatchTarget, offered } from './dispatch.contract';

const KEY = randomBytes(32);
const COOKIES = 'pt_key=AAAA-env-one;pt_pin=jd_1;&pt_key=BBBB-env-two;pt_pin=jd_2;';
const NEW_COOKIES = 'pt_key=CCCC-env-three;pt_pin=jd_3;\npt_key=DDDD-env-four;pt_pin=jd_4;';

async function refusal(p: Promise<unknown>): Promise<unknown> {
  return p.then(
    () => null,
    (e: unknown) => e,
  );
}

export function describeEnvVarsContract(dialect: string, makeTarget: () => DispatchTarget): void {
  describe(`env vars (${dialect})`, () => {
    let target: DispatchTarget;
    let f: DispatchFixture;
    let vars: SqlEnvVarRepository;
    let secrets: SqlSecretRepository;
    let audit: SqlAuditRepository;
    let acts: SqlActivationRepository;
    const cipher = new SecretCipher('k1', KEY);

    beforeAll(async () => {
      target = makeTarget();
      f = new DispatchFixture(await target.open());
      vars = new SqlEnvVarRepository(f.db, f.ids, cipher);
      secrets = new SqlSecretRepository(f.db, f.ids, cipher);
      audit = new SqlAuditRepository(f.db);
      acts = new SqlActivationRepository(f.db, { redaction: secrets.redaction });
    });
    afterAll(async () => {
      await target.dispose();
    });
    beforeEach(async () => {
      // Runs of earlier tests would be offered first: each test pulls its own.
      await f.db.run("UPDATE runs SET status = 'cancelled' WHERE status = 'queued'");
      await f.db.run('DELETE FROM task_secret_uses');
      await f.db.run('DELETE FROM env_vars');
      await f.db.run("DELETE FROM secrets WHERE name LIKE 'env.%'");
    });

    const add = (input: Partial<NewEnvVar> & { name: string }, repo = vars) =>
      repo.create(parseNewEnvVar({ value: '1', ...input }), AUDIT);
    /** `action` throws what it is refused with, and changes no row of any table. */
    const refusedUnchanged = async (action: () => Promise<unknown>) => {
      const before = await snapshotDatabase(f.db);
      const error = await refusal(action());
      expect(await snapshotDatabase(f.db)).toEqual(before);
      return error;
    };

    it('stores a plain variable as given and a secret one as the sealed secret env.<NAME>, never in the clear', async () => {
      const plain = await add({ name: 'JD_UA', value: 'jdapp;iPhone&京东', remark: '京东 UA（所有任务）' });
      expect(plain).toMatchObject({
        name: 'JD_UA',
        secret: false,
        value: 'jdapp;iPhone&京东',
        remark: '京东 UA（所有任务）',
        enabled: true,
        position: 1,
        version: 1,
      });
      const secret = await add({ name: 'JD_COOKIE', value: COOKIES, secret: true, remark: '两个账号' });
      expect(secret).toMatchObject({ name: 'JD_COOKIE', secret: true, value: null, position: 2, version: 1 });
      const row = await f.db.one<{ key_id: string; nonce: string; ciphertext: string }>(
        "SELECT key_id, nonce, ciphertext FROM secrets WHERE name = 'env.JD_COOKIE'",
      );
      expect(
        cipher.open('env.JD_COOKIE', { keyId: row!.key_id, nonce: row!.nonce, ciphertext: row!.ciphertext }),
      ).toBe(COOKIES);
      const everything = JSON.stringify(await snapshotDatabase(f.db));
      expect(everything).not.toContain('AAAA-env-one');
      expect(everything).not.toContain('BBBB-env-two');
      expect(JSON.stringify(await vars.list({ limit: 10 }))).not.toContain('env-one');
      const entries = (await audit.list(20)).filter((e) => e.target.startsWith('env_var:'));
      expect(entries.map((e) => `${e.action} ${e.target}`).sort()).toEqual([
        'env_var.create env_var:JD_COOKIE',
        'env_var.create env_var:JD_UA',
      ]);
      expect(JSON.stringify(entries)).not.toMatch(/env-one|jdapp/);
    });

    it('the version grows when the value changes, not for a remark, enabled, or the same plain value', async () => {
      await add({ name: 'JD_COOKIE', value: COOKIES, secret: true });
      await add({ name: 'QL_NOTIFY', value: 'bark' });
      expect(await vars.update('QL_NOTIFY', { value: 'bark' }, AUDIT)).toMatchObject({ version: 1 });
      expect(await vars.update('QL_NOTIFY', { remark: '通知方式', enabled: false }, AUDIT)).toMatchObject({
        version: 1,
        remark: '通知方式',
        enabled: false,
      });
      expect(await vars.update('QL_NOTIFY', { value: 'telegram' }, AUDIT)).toMatchObject({
        version: 2,
        value: 'telegram',
      });
      expect(await vars.update('JD_COOKIE', { value: NEW_COOKIES }, AUDIT)).toMatchObject({
        version: 2,
        value: null,
      });
      const row = await f.db.one<{ key_id: string; nonce: string; ciphertext: string }>(
        "SELECT key_id, nonce, ciphertext FROM secrets WHERE name = 'env.JD_COOKIE'",
      );
      expect(
        cipher.open('env.JD_COOKIE', { keyId: row!.key_id, nonce: row!.nonce, ciphertext: row!.ciphertext }),
      ).toBe(NEW_COOKIES);
    });

    it('refuses, writing nothing: a second variable of a name, a plain value by the env rule, an unknown name', async () => {
      await add({ name: 'JD_UA', value: 'ua' });
      const twice = await refusedUnchanged(() => add({ name: 'JD_UA', value: 'other' }));
      expect(twice).toBeInstanceOf(ConflictError);
      expect((twice as ConflictError).reason).toBe('env_var_exists');
      // A line-feed-joined list is a secret's form; as plain it would break an old worker's spec reader.
      const lines = await refusedUnchanged(() => vars.update('JD_UA', { value: 'a\nb' }, AUDIT));
      expect(lines).toMatchObject({ field: 'value', rule: 'control_character' });
      const unknown = await refusedUnchanged(() => vars.update('NOBODY', { enabled: false }, AUDIT));
      expect(unknown).toBeInstanceOf(NotFoundError);
      expect(await refusedUnchanged(() => vars.delete('NOBODY', AUDIT))).toBeInstanceOf(NotFoundError);
    });

    it('keeps every spec within its limits: the write that would pass one is refused and nothing is written', async () => {
      for (let i = 0; i < ENV_VAR_LIMITS.enabledSecret; i++)
        await add({ name: `COOKIE_${i}`, value: 'v', secret: true });
      const secret = await refusedUnchanged(() => add({ name: 'COOKIE_X', value: 'v', secret: true }));
      expect(secret).toMatchObject({ reason: 'env_vars_limit' });
      // Disabled it may exist; enabling it is the write refused.
      await add({ name: 'COOKIE_X', value: 'v', secret: true, enabled: false });
      const enabling = await refusedUnchanged(() => vars.update('COOKIE_X', { enabled: true }, AUDIT));
      expect(enabling).toMatchObject({ reason: 'env_vars_limit' });

      const big = 'x'.repeat(4000);
      for (let i = 0; i < 4; i++) await add({ name: `BIG_${i}`, value: big });
      const bytes = await refusedUnchanged(() => add({ name: 'BIG_4', value: big }));
      expect(bytes).toMatchObject({ reason: 'env_vars_limit' });
      expect((bytes as Error).message).toContain(`at most ${ENV_VAR_LIMITS.enabledPlainBytes}`);
      for (let i = 4; i < ENV_VAR_LIMITS.enabledPlain; i++) await add({ name: `PLAIN_${i}`, value: 'v' });
      const count = await refusedUnchanged(() => add({ name: 'PLAIN_X', value: 'v' }));
      expect(count).toMatchObject({ reason: 'env_vars_limit' });
    });

    it('orders by position: created at the end, a reorder names every variable once, pages continue after a name', async () => {
      for (const name of ['A_1', 'B_2', 'C_3', 'D_4']) await add({ name });
      const reordered = await vars.reorder(['D_4', 'B_2', 'A_1', 'C_3'], AUDIT);
      expect(reordered.map((v) => `${v.position}:${v.name}`)).toEqual(['1:D_4', '2:B_2', '3:A_1', '4:C_3']);
      const first = await vars.list({ limit: 2 });
      expect(first.map((v) => v.name)).toEqual(['D_4', 'B_2']);
      expect((await vars.list({ after: 'B_2', limit: 2 })).map((v) => v.name)).toEqual(['A_1', 'C_3']);
      expect(await vars.list({ after: 'C_3', limit: 2 })).toEqual([]);
      expect(await refusal(vars.list({ after: 'NOBODY', limit: 2 }))).toBeInstanceOf(ValidationError);
      const missing = await refusedUnchanged(() => vars.reorder(['D_4', 'B_2', 'A_1'], AUDIT));
      expect(missing).toMatchObject({ reason: 'order_mismatch' });
      expect((missing as Error).message).toContain('C_3');
      const unknown = await refusedUnchanged(() => vars.reorder(['D_4', 'B_2', 'A_1', 'C_3', 'E_5'], AUDIT));
      expect(unknown).toMatchObject({ reason: 'order_mismatch' });
      expect((await add({ name: 'E_5' })).position).toBe(5);
    });

    it('a secret variable is deleted with its secret; the secrets API cannot delete it, nor can either while a task maps it', async () => {
      await add({ name: 'JD_COOKIE', value: COOKIES, secret: true });
      const bySecrets = await refusedUnchanged(() => secrets.delete('env.JD_COOKIE', AUDIT));
      expect(bySecrets).toMatchObject({ reason: 'env_var_secret' });
      const task = await f.task({ name: '京东签到', secretEnv: { JD_COOKIE_ALL: 'env.JD_COOKIE' } });
      const mapped = await refusedUnchanged(() => vars.delete('JD_COOKIE', AUDIT));
      expect(mapped).toMatchObject({ reason: 'secret_in_use' });
      await f.tasks.delete(task.id, AUDIT);
      expect(await vars.delete('JD_COOKIE', AUDIT)).toMatchObject({ name: 'JD_COOKIE', secret: true });
      expect(await f.count('secrets', "name = 'env.JD_COOKIE'")).toBe(0);
      expect(await vars.find('JD_COOKIE')).toBeNull();
    });

    it('a run receives the enabled variables merged into its offered spec, the task’s own winning; it records names and versions; its digest is the merged spec’s', async () => {
      const before = await f.claimedRun(`w-before-${dialect}`, { name: '京东签到-无变量' });
      expect(before.offer.revision.digest).toBe(before.run.specDigest);
      expect(await f.runs.envVars(before.run.id)).toEqual([]);

      await add({ name: 'JD_COOKIE', value: COOKIES, secret: true, remark: '两个账号' });
      await add({ name: 'JD_UA', value: 'jdapp;iPhone' });
      await add({ name: 'QL_NOTIFY', value: 'global-bark' });
      await add({ name: 'OFF_VAR', value: 'never', enabled: false });
      await vars.update('JD_UA', { value: 'jdapp;Android' }, AUDIT);
      const c = await f.claimedRun(`w-merge-${dialect}`, {
        name: '京东签到',
        command: 'node jd_sign.js',
        runtime: 'node',
        env: { QL_NOTIFY: 'task-telegram' },
      });
      const spec = c.offer.revision.spec;
      expect(spec.env).toEqual({ JD_UA: 'jdapp;Android', QL_NOTIFY: 'task-telegram' });
      expect(spec.secretEnv).toEqual({ JD_COOKIE: 'env.JD_COOKIE' });
      const reread = parseTaskSpec(JSON.parse(JSON.stringify(spec)));
      expect(c.offer.revision.digest).toBe(reread.digest);
      expect(c.run.specDigest).toBe(reread.digest);
      expect(JSON.stringify(c.offer)).not.toContain('env-one');
      expect(await f.runs.envVars(c.run.id)).toEqual([
        { name: 'JD_COOKIE', version: 1, secret: true },
        { name: 'JD_UA', version: 2, secret: false },
      ]);
      await acts.starting(c.fence);
      expect((await secrets.deliver(c.fence)).env).toEqual({ JD_COOKIE: COOKIES });

      // Changed since: the pinned run is offered what it was pinned with (a replay rebuilds it).
      await vars.update('JD_UA', { value: 'jdapp;HarmonyOS' }, AUDIT);
      const replay = offered(await f.pull(c.worker, c.offer.lease.offerId, c.token));
      expect(replay.revision.spec.env).toEqual({ JD_UA: 'jdapp;Android', QL_NOTIFY: 'task-telegram' });
      expect(replay.revision.digest).toBe(c.run.specDigest);
    });

    it('a task whose spec with the enabled variables passes a task limit is not run: 409 env_vars_do_not_fit, nothing written', async () => {
      for (let i = 0; i < 8; i++) await add({ name: `BIG_${i}`, value: 'x'.repeat(1900) });
      const task = await f.task({
        name: '大环境任务',
        env: {
          OWN: 'y'.repeat(4000),
          OWN_2: 'y'.repeat(4000),
          OWN_3: 'y'.repeat(4000),
          OWN_4: 'y'.repeat(4000),
          OWN_5: 'y'.repeat(4000),
        },
      });
      const error = await refusedUnchanged(() => f.queue(task.id, 1));
      expect(error).toMatchObject({ reason: 'env_vars_do_not_fit' });
      expect((error as Error).message).toContain('env: too_large');
      await f.tasks.delete(task.id, AUDIT);
    });

    it('without a key a secret variable is refused as secrets_disabled (a plain one is stored); a secret made earlier under env.<NAME> is not taken over', async () => {
      const keyless = new SqlEnvVarRepository(f.db, f.ids, undefined);
      const error = await refusedUnchanged(() =>
        add({ name: 'JD_COOKIE', value: COOKIES, secret: true }, keyless),
      );
      expect(error).toBeInstanceOf(UnavailableError);
      expect((error as UnavailableError).reason).toBe('secrets_disabled');
      expect(await add({ name: 'JD_UA', value: 'ua' }, keyless)).toMatchObject({ secret: false });

      await secrets.put('env.OLD_TOKEN', 'made-before-env-vars', AUDIT);
      const taken = await refusedUnchanged(() => add({ name: 'OLD_TOKEN', value: 'v', secret: true }));
      expect(taken).toMatchObject({ reason: 'secret_exists' });
      await f.db.run("DELETE FROM secrets WHERE name = 'env.OLD_TOKEN'");
    });
  });
}
