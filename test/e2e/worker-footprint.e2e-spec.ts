/**
 * ADR 0048: what a real worker process holds. Asked through the preloaded probe the control plane's
 * footprint test uses (test/support/loaded-packages-probe.js): a registered worker, and the same worker
 * after it ran a task, has built no `Intl.DateTimeFormat` (Nest's logger formatters wait for a first
 * use, as in the control plane: building one loads ICU's locale and time-zone data, ~6.5 MiB), and has
 * loaded none of the control plane's packages.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { LogLine } from '../support/child-process';
import { ROOT, WORKER_BUNDLE } from '../support/entry-points';
import { RemoteRunHarness, RunWorker } from '../support/remote-run-harness';

jest.setTimeout(180_000);

/** Packages only the control plane uses: the worker's graph holds none of them (ADR 0014). */
const NOT_IN_WORKER = [
  'typeorm',
  'pg',
  'class-validator',
  'class-transformer',
  '@nestjs/swagger',
  'fastify',
  'prom-client',
  '@peculiar/x509',
];

/**
 * Started as its bundle (`QL_TEST_WORKER_ENTRY=bundle`, ADR 0049), the worker requires only what the
 * bundle leaves out (better-sqlite3): what the bundle holds is in the inputs.json the build writes
 * beside it.
 */
const bundled = process.env.QL_TEST_WORKER_ENTRY === 'bundle';
const packageOf = (file: string) => {
  const parts = file.slice(file.lastIndexOf('node_modules/') + 'node_modules/'.length).split('/');
  return parts[0]!.startsWith('@') ? `${parts[0]}/${parts[1]}` : parts[0]!;
};

interface Probe extends LogLine {
  packages: string[];
  dateTimeFormats: number;
}

describe('a real worker process holds no date formatter and no control-plane package (ADR 0048)', () => {
  let h: RemoteRunHarness;
  let w: RunWorker;

  beforeAll(async () => {
    h = await RemoteRunHarness.start('sqlite', ['worker-a']);
    w = h.startWorker('worker-a', {
      env: { NODE_OPTIONS: `--require ${join(ROOT, 'test', 'support', 'loaded-packages-probe.js')}` },
    });
    await h.untilOnline(w);
  });
  afterAll(async () => {
    await h?.close();
  });

  const probe = async (): Promise<Probe> => {
    const seen = w.lines.length;
    w.kill('SIGUSR2');
    return w.until('the loaded packages probe', async () =>
      w.lines.slice(seen).find((l): l is Probe => l.msg === 'loaded packages probe'),
    );
  };

  it('registered and idle: no date formatter built, no control-plane package loaded', async () => {
    const p = await probe();
    expect(p.dateTimeFormats).toBe(0);
    expect(p.packages).toEqual(
      expect.arrayContaining(bundled ? ['better-sqlite3'] : ['better-sqlite3', 'rxjs']),
    );
    expect(p.packages.filter((name) => NOT_IN_WORKER.includes(name))).toEqual([]);
    if (bundled) {
      const inputs = JSON.parse(
        readFileSync(join(ROOT, WORKER_BUNDLE, '..', 'inputs.json'), 'utf8'),
      ) as string[];
      const held = new Set(inputs.filter((f) => f.includes('node_modules/')).map(packageOf));
      expect(held).toContain('rxjs');
      expect([...held].filter((name) => NOT_IN_WORKER.includes(name))).toEqual([]);
    }
  });

  it('after a run (executor, log upload, completion, journal): still none', async () => {
    const run = await h.untilRunEnds(
      await h.trigger(await h.createTask({ command: 'echo hi', runtime: 'shell' })),
    );
    expect(run.status).toBe('succeeded');
    const p = await probe();
    expect(p.dateTimeFormats).toBe(0);
    expect(p.packages.filter((name) => NOT_IN_WORKER.includes(name))).toEqual([]);
  });
});
