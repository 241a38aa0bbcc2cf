/**
 * Issue 29 item 5: the README's key rotation steps ("Secrets"), run as written against a live
 * `npm start` (control plane and worker): a secret run before, after each step and at the end
 * succeeds; `rotate` before step 1 is refused while the running plane lacks the new key. On
 * PostgreSQL (`QL_PROFILE=cluster-control QL_DEV_PKI=true npm start`, as the README starts a replica):
 * the SQLite quickstart's rotation, command for command as the README has it, is replayed by
 * readme-replay.e2e-spec.ts (ADR 0058).
 */
import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import {
  EntryPoint,
  QUICKSTART,
  cliWithInput,
  quickstartEnv,
  runCli,
  tempDir,
} from '../support/entry-points';
import { Dialect, TestDatabase, createTestDatabase } from '../support/test-plane';

jest.setTimeout(300_000);

const VALUE = 'pt_key=ROTATE-0123;pt_pin=r;';

describe.each<Dialect>(['postgres'])(
  'the README key rotation steps, against npm start with its worker (%s)',
  (dialect) => {
    let dir: string;
    let db: TestDatabase;
    let quickstart: EntryPoint | undefined;

    beforeAll(async () => {
      db = await createTestDatabase(dialect);
    });
    afterAll(async () => {
      if (quickstart?.running) {
        quickstart.kill('SIGTERM');
        await quickstart.exited;
      }
      await db?.dispose();
      rmSync(dir, { recursive: true, force: true });
    });

    const start = async (env: Record<string, string>) => {
      if (quickstart) {
        quickstart.kill('SIGTERM'); // Ctrl-C: the worker drains, then the control plane stops
        expect((await quickstart.exited).code).toBe(0);
      }
      const q = (quickstart = new EntryPoint(QUICKSTART, env));
      await q.until('worker-1 registered', async () => q.lines.find((l) => l.msg === 'worker registered'), {
        deadlineMs: 90_000,
      });
    };

    it('keeps secret runs working before, during and after the rotation', async () => {
      dir = tempDir('ql-rotation-steps-');
      const oldKey = randomBytes(32).toString('base64');
      const base = await quickstartEnv(dir, {
        QL_SECRETS_KEY: oldKey,
        QL_DATABASE_URL: db.url,
        ...(dialect === 'postgres' ? { QL_PROFILE: 'cluster-control', QL_DEV_PKI: 'true' } : {}),
      });
      await start(base);
      expect(cliWithInput(base, ['secret', 'set', 'jd-cookie'], VALUE).code).toBe(0);

      const key = await runCli(base, 'api-key', '--name', 'ops', '--role', 'admin');
      const token = /"token":\s*"([^"]+)"/.exec(key.stdout)?.[1];
      const api = async (method: string, path: string, body?: unknown) => {
        const res = await fetch(`http://127.0.0.1:${base.QL_ADMIN_PORT}${path}`, {
          method,
          headers: {
            authorization: `Bearer ${token}`,
            ...(body ? { 'content-type': 'application/json' } : {}),
          },
          ...(body ? { body: JSON.stringify(body) } : {}),
        });
        return (await res.json()) as Record<string, unknown>;
      };
      const task = await api('POST', '/api/v1/tasks', {
        name: 'cookie length',
        runtime: 'shell',
        command: 'echo "length ${#JD_COOKIE}"',
        secretEnv: { JD_COOKIE: 'jd-cookie' },
      });
      /** One run of the task: its status and output (the value itself would be `***`). */
      const secretRun = async () => {
        const created = (await api('POST', `/api/v1/tasks/${String(task.id)}/runs`)) as {
          run: { id: string };
        };
        const runId = created.run.id;
        let status = '';
        await quickstart!.until(
          'the secret run ended',
          async () => {
            status = String((await api('GET', `/api/v1/runs/${runId}`)).status);
            return ['succeeded', 'failed', 'cancelled', 'timed_out', 'lost'].includes(status)
              ? true
              : undefined;
          },
          { deadlineMs: 60_000, pollMs: 200 },
        );
        const logs = (await api('GET', `/api/v1/runs/${runId}/logs`)) as { items: { text: string }[] };
        return { status, output: logs.items.map((i) => i.text).join('') };
      };
      const works = { status: 'succeeded', output: `length ${VALUE.length}\n` };
      expect(await secretRun()).toEqual(works);

      // The step as written, but first: rotate before the control plane has the new key is refused.
      const newKey = randomBytes(32).toString('base64');
      const step1 = {
        ...base,
        QL_SECRETS_PREVIOUS_KEYS: `primary:${oldKey}`,
        QL_SECRETS_KEY: newKey,
        QL_SECRETS_KEY_ID: 'k2',
      };
      const early = cliWithInput(step1, ['secret', 'rotate']);
      expect(early.code).toBe(1);
      expect(early.stderr).toContain('key_not_on_control_plane');
      expect(await secretRun()).toEqual(works);

      // 1. restart with the new key and the old one beside it.
      await start(step1);
      expect(await secretRun()).toEqual(works);
      // 2. rotate.
      expect(cliWithInput(step1, ['secret', 'rotate']).code).toBe(0);
      const listed = JSON.parse(cliWithInput(step1, ['secret', 'list']).stdout) as {
        items: { keyId: string }[];
      };
      expect(listed.items.map((s) => s.keyId)).toEqual(['k2']);
      expect(await secretRun()).toEqual(works);
      // 3. restart without the old key.
      const step3 = { ...step1 };
      delete (step3 as Record<string, string | undefined>).QL_SECRETS_PREVIOUS_KEYS;
      await start(step3);
      expect(await secretRun()).toEqual(works);
    });
  },
);
