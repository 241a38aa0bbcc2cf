import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EntryPoint } from '../support/entry-points';
import type { InertStep } from './fixtures/worker-inert-probe';

/**
 * R-PROF-3: the worker module graph is inert until `start()`. Importing it and building each profile's
 * Nest context must add no timer, socket, file request or child process: live handles counted with
 * `process.getActiveResourcesInfo()` before and after each step, and an async hook records every timer,
 * socket, file request and child process *created* meanwhile, unref'd ones included (the heartbeat
 * timer is unref'd). Signal handlers are not watched.
 *
 * The probe runs in a node process of its own: in jest's process the reporter's status timer and the
 * module cache writer start timers of their own while a step runs (on a loaded machine, every time).
 */
const PROBE = 'test/e2e/fixtures/worker-inert-probe.ts';

interface Report {
  steps: InertStep[];
  left: Record<string, number>;
  foldersExist: boolean;
}

describe('worker module without start() (R-PROF-3)', () => {
  let report: Report;
  /** Where the probe's worker would keep its journal and run folders: they must not appear. */
  const folders = join(tmpdir(), `ql-inert-${process.pid}-${Date.now()}`);

  beforeAll(async () => {
    const probe = new EntryPoint(PROBE, {
      QL_WORKER_JOURNAL_DIR: join(folders, 'journal'),
      QL_WORKER_WORK_DIR: join(folders, 'runs'),
      PROBE_FOLDERS: folders,
    });
    const exit = await probe.exited;
    expect({ exit, stderr: probe.stderr }).toEqual({ exit: { code: 0, signal: null }, stderr: [] });
    report = probe.lines.at(-1) as unknown as Report;
  }, 60_000);

  const step = (name: string) => report.steps.find((s) => s.step === name)!;
  /** What a step added and created, by type (stacks shown only when something was created). */
  const effects = (s: InertStep) => ({ added: s.added, created: s.created });

  it('importing the worker module graph adds and creates nothing', () => {
    expect(effects(step('import'))).toEqual({ added: {}, created: [] });
  });

  it.each(['plain', 'standalone', 'worker'])(
    "building the %s profile's context adds and creates nothing; journal and executor stay unopened",
    (profile) => {
      const s = step(`context ${profile}`);
      expect(effects(s)).toEqual({ added: {}, created: [] });
      expect(s.facts).toEqual({
        state: 'idle',
        journalOpen: false,
        journalDir: join(folders, 'journal'),
        executor: true,
        // ScheduleModule is in the worker profile's graph only, with nothing scheduled before start().
        scheduled: profile === 'worker' ? [] : 'absent',
      });
    },
  );

  it('outside the worker profile the lifecycle has no scheduler and cannot start', () => {
    for (const profile of ['plain', 'standalone'])
      expect(String(step(`closed ${profile}`).facts.start)).toMatch(/QL_PROFILE=worker/);
  });

  it('after every context closed nothing is left, and no journal or run folder was made', () => {
    expect({ left: report.left, foldersExist: report.foldersExist }).toEqual({ left: {}, foldersExist: false });
  });
});
