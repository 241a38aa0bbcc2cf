import { createIdGenerator } from '@ql/contracts';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import type { RecordedProcess } from '../journal/journal-record';
import { liveGroupMembers } from '../host/process-table';
import { orphanRun as orphanRunIn } from '../../test-support/journal-fixtures';
import { killLeftoverGroup } from './leftover-group';
import type { LocalRun } from './local-process.executor';

const ids = createIdGenerator();
let root: string;
beforeEach(() => (root = mkdtempSync(join(tmpdir(), 'ql-leftover-'))));
afterEach(() => rmSync(root, { recursive: true, force: true }));

const orphanRun = (attemptId: string, command?: string): Promise<LocalRun> =>
  orphanRunIn(root, attemptId, command);

const REGISTER = resolve(__dirname, '../../test-support/swc-register.js');
const EXECUTOR = resolve(__dirname, 'local-process.executor.ts');
const REAPER = resolve(__dirname, 'group-reaper.ts');

describe('killLeftoverGroup (R-WRK-2 restart)', () => {
  it('kills the group of a worker process that was SIGKILLed mid-run and whose reaper was gone too', async () => {
    const attemptId = ids.uuidV7();
    // The worker prints its run's process once the run has started its grandchild, then gets killed.
    // Its reaper cannot start (as if the OOM killer had taken it with the worker): the group outlives it.
    const script = `
      const { LocalProcessExecutor } = require(${JSON.stringify(EXECUTOR)});
      const { GroupReaper } = require(${JSON.stringify(REAPER)});
      let run, output = false;
      const report = () => run && output && console.log(JSON.stringify(run.process));
      new LocalProcessExecutor({ workRoot: ${JSON.stringify(root)}, killGraceMs: 300, outputCapBytes: 4096 },
        new GroupReaper('/nonexistent/sh'))
        .launch({ offerId: ${JSON.stringify(ids.uuidV7())}, attemptId: ${JSON.stringify(attemptId)},
          runtime: 'shell', command: 'sleep 30 & echo started; wait', env: {}, timeoutMs: 60000,
          onOutput: () => { output = true; report(); } })
        .then((r) => { run = r; report(); });`;
    const worker = spawn(process.execPath, ['-r', REGISTER, '-e', script], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const [line] = (await once(createInterface({ input: worker.stdout! }), 'line')) as [string];
    const recorded = JSON.parse(line) as RecordedProcess;
    worker.kill('SIGKILL');
    await once(worker, 'exit');
    expect(liveGroupMembers(recorded.pgid).length).toBeGreaterThanOrEqual(2); // the run outlived its worker
    await expect(killLeftoverGroup(recorded, attemptId, 300)).resolves.toBe('killed');
    expect(liveGroupMembers(recorded.pgid)).toEqual([]);
  });

  it('kills the group a crashed predecessor left, after finding its attempt marker', async () => {
    const attemptId = ids.uuidV7();
    const run = await orphanRun(attemptId);
    expect(liveGroupMembers(run.pgid).length).toBeGreaterThanOrEqual(2);
    await expect(killLeftoverGroup(run.process, attemptId, 300)).resolves.toBe('killed');
    expect(liveGroupMembers(run.pgid)).toEqual([]);
    await run.done;
  });

  it('kills a group whose members ignore SIGTERM with SIGKILL after the grace', async () => {
    const attemptId = ids.uuidV7();
    const run = await orphanRun(attemptId, 'trap "" TERM; sleep 30 & echo started; wait');
    await expect(killLeftoverGroup(run.process, attemptId, 200)).resolves.toBe('killed');
    expect(liveGroupMembers(run.pgid)).toEqual([]);
    await run.done;
  });

  it('leaves alone a live group that does not carry the attempt marker', async () => {
    const run = await orphanRun(ids.uuidV7());
    await expect(killLeftoverGroup(run.process, ids.uuidV7(), 300)).resolves.toBe('not_ours');
    expect(liveGroupMembers(run.pgid).length).toBeGreaterThanOrEqual(2);
    run.cancel();
    await run.done;
  });

  it('reports gone for a group that ended, or one recorded in another boot', async () => {
    const attemptId = ids.uuidV7();
    const run = await orphanRun(attemptId, 'echo started');
    await run.done;
    await expect(killLeftoverGroup(run.process, attemptId, 300)).resolves.toBe('gone');
    const live = await orphanRun(attemptId);
    await expect(
      killLeftoverGroup({ ...live.process, bootId: 'another-boot' }, attemptId, 300),
    ).resolves.toBe('gone');
    expect(liveGroupMembers(live.pgid).length).toBeGreaterThanOrEqual(2);
    live.cancel();
    await live.done;
  });
});
