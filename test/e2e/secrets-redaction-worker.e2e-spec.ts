// Issue 27 item 3 on a real worker process over real TLS, both dialects: a task whose run maps 512
// secrets (the limit) prints one of them tens of thousands of times. The worker redacts every one
// and keeps its session (5 s session leases here): the redaction before (an indexOf per value per
// match) blocked the worker's event loop for seconds per output chunk, its heartbeats timed out and
// the run was lost.
import { randomBytes } from 'node:crypto';
import { RemoteRunHarness, RunWorker } from '../support/remote-run-harness';
import type { Dialect } from '../support/test-plane';

jest.setTimeout(240_000);

const VALUES = Array.from({ length: 512 }, (_v, i) => `s${i}-${randomBytes(4).toString('hex')}`);

describe.each<Dialect>(['sqlite', 'postgres'])(
  'the worker redacts 512 values at output speed (%s)',
  (dialect) => {
    let h: RemoteRunHarness;
    let worker: RunWorker;

    beforeAll(async () => {
      h = await RemoteRunHarness.start(dialect, ['worker-a'], {
        QL_SECRETS_KEY: randomBytes(32).toString('base64'),
      });
      for (const [i, value] of VALUES.entries())
        expect((await h.t.admin('POST', '/api/v1/secrets', { name: `s${i}`, value })).status).toBe(201);
      worker = h.startWorker('worker-a');
      await h.untilOnline(worker);
    });
    afterAll(async () => {
      await h?.close();
    });

    it('a script printing one value 40,000 times succeeds, shows only ***, and its worker keeps its session', async () => {
      const session = (await h.worker('worker-a'))!.sessionId;
      // 32 env names, each joining 16 secrets: every value mapped, 512 in all.
      const secretEnv = Object.fromEntries(
        Array.from({ length: 32 }, (_e, e) => [
          `E${e}`,
          Array.from({ length: 16 }, (_s, s) => `s${e * 16 + s}`).join('&'),
        ]),
      );
      const command = [
        'const v = process.env.E3.split("&")[5];',
        'const line = (v + " ").repeat(1000) + "\\n";',
        'for (let i = 0; i < 40; i++) process.stdout.write(line);',
      ].join('\n');
      const runId = await h.trigger(await h.createTask({ runtime: 'node', command, secretEnv }));
      const run = await h.untilRunEnds(runId, 120_000);
      const ended = run.events.filter((e) => e.type === 'attempt.finished').map((e) => e.detail);
      expect({ status: run.status, ended }).toEqual({
        status: 'succeeded',
        ended: [expect.objectContaining({ status: 'succeeded' })],
      });
      const output = await h.output(runId, 'stdout');
      expect(output.split('\n')[0]).toBe('*** '.repeat(1000));
      expect(output).not.toContain(VALUES[3 * 16 + 5]!);
      expect((await h.worker('worker-a'))!.sessionId).toBe(session);
    });
  },
);
