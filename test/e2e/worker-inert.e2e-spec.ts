import 'reflect-metadata';
import { createHook } from 'node:async_hooks';
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { NestFactory } from '@nestjs/core';
import { SchedulerRegistry } from '@nestjs/schedule';
import type { LocalProcessExecutor } from '../../apps/worker/src/executor/local-process.executor';
import type { WorkerJournal } from '../../apps/worker/src/journal/worker-journal';
import type * as LifecycleFile from '../../apps/worker/src/lifecycle/worker-lifecycle.service';
import type * as WorkerModuleFile from '../../apps/worker/src/worker.module';

/**
 * R-PROF-3: the worker module graph is inert until `start()`. Importing it and building its Nest
 * context must add no timer, socket, file request or child process — counted with
 * `process.getActiveResourcesInfo()` before and after, once pending macrotasks had their turn.
 * That count only sees ref'd resources, so an async hook also records every timer, socket, file
 * request and child process *created* meanwhile, unref'd ones included (the heartbeat timer is unref'd).
 * Signal handlers are not watched: jest's own cache writer installs some while it compiles an import.
 */
const WATCHED = [
  'Timeout',
  'Immediate',
  'TCPSocketWrap',
  'TCPWRAP',
  'TLSWrap',
  'PipeWrap',
  'FSReqCallback',
  'FSReqPromise',
  'FileHandle',
  'ProcessWrap',
];

function count(): Record<string, number> {
  const counts: Record<string, number> = Object.fromEntries(WATCHED.map((t) => [t, 0]));
  for (const r of process.getActiveResourcesInfo()) if (r in counts) counts[r]!++;
  return counts;
}
const macrotask = () => new Promise((resolve) => setImmediate(resolve));

/** Every watched type: how many more there are now than before (never negative). */
function added(before: Record<string, number>, after: Record<string, number>): Record<string, number> {
  return Object.fromEntries(WATCHED.map((t) => [t, Math.max(0, after[t]! - before[t]!)]));
}
const none = Object.fromEntries(WATCHED.map((t) => [t, 0]));

/**
 * What is still added over `before` once pending one-shot work has run: jest's own module cache
 * writer may queue an Immediate of its own while an import compiles, under a loaded machine. One-shot
 * work drains within a few turns; a handle the worker holds (a timer, a socket, an Immediate that
 * re-arms itself) is still there after every turn and is reported.
 */
async function addedOnceSettled(before: Record<string, number>): Promise<Record<string, number>> {
  let now = added(before, count());
  for (let turn = 0; turn < 20 && JSON.stringify(now) !== JSON.stringify(none); turn++) {
    await macrotask();
    now = added(before, count());
  }
  return now;
}

const CREATED_WATCHED =
  /^(Timeout|TCPWRAP|TCPCONNECTWRAP|TLSWRAP|PIPEWRAP|PIPECONNECTWRAP|FSREQCALLBACK|FSREQPROMISE|FILEHANDLE|PROCESSWRAP|GETADDRINFOREQWRAP|FSEVENTWRAP|STATWATCHER)$/;

/** The watched resource types created while `fn` runs (no macrotask of this test in between). */
async function createdDuring(fn: () => Promise<void>): Promise<string[]> {
  const created: string[] = [];
  const hook = createHook({
    init: (_id, type) => {
      if (CREATED_WATCHED.test(type)) created.push(type);
    },
  });
  hook.enable();
  try {
    await fn();
  } finally {
    hook.disable();
  }
  return created;
}

/**
 * Loaded inside the measured window, through variables: a literal extensionless `import('…')` fails
 * `tsc` under `moduleResolution: nodenext` (TS2835); SWC turns this into a `require` from this file.
 */
const WORKER_MODULE = '../../apps/worker/src/worker.module';
const LIFECYCLE = '../../apps/worker/src/lifecycle/worker-lifecycle.service';
const JOURNAL = '../../apps/worker/src/journal/worker-journal';
const EXECUTOR = '../../apps/worker/src/executor/local-process.executor';
const load = (path: string): Promise<unknown> => import(path);

/** Where this test's worker would keep its journal and run folders: they must not appear. */
const folders = join(tmpdir(), `ql-inert-${process.pid}-${Date.now()}`);
beforeAll(() => {
  process.env.QL_WORKER_JOURNAL_DIR = join(folders, 'journal');
  process.env.QL_WORKER_WORK_DIR = join(folders, 'runs');
});
afterAll(() => {
  delete process.env.QL_WORKER_JOURNAL_DIR;
  delete process.env.QL_WORKER_WORK_DIR;
});

describe('worker module without start() (R-PROF-3)', () => {
  it('importing the module and building its standalone context adds no timer, socket, file or child process', async () => {
    await macrotask();
    const beforeImport = count();
    let modules!: [
      typeof WorkerModuleFile,
      typeof LifecycleFile,
      { WorkerJournal: typeof WorkerJournal },
      { LocalProcessExecutor: typeof LocalProcessExecutor },
    ];
    const createdByImport = await createdDuring(async () => {
      modules = (await Promise.all([
        load(WORKER_MODULE),
        load(LIFECYCLE),
        load(JOURNAL),
        load(EXECUTOR),
      ])) as typeof modules;
    });
    const [
      { WorkerModule },
      { WorkerLifecycleService },
      { WorkerJournal: journalClass },
      { LocalProcessExecutor: executorClass },
    ] = modules;
    await macrotask();
    expect(await addedOnceSettled(beforeImport)).toEqual(none);
    expect(createdByImport).toEqual([]);

    // Every graph: the plain module and another profile's (no scheduling at all) and the worker
    // profile's (ScheduleModule in it) add nothing until start().
    const workerGraph = WorkerModule.forProfile('worker');
    for (const graph of [WorkerModule, WorkerModule.forProfile('standalone'), workerGraph]) {
      const beforeContext = count();
      let app!: Awaited<ReturnType<typeof NestFactory.createApplicationContext>>;
      const createdByContext = await createdDuring(async () => {
        app = await NestFactory.createApplicationContext(graph, { logger: false });
      });
      try {
        await macrotask();
        await macrotask();
        expect(await addedOnceSettled(beforeContext)).toEqual(none);
        expect(createdByContext).toEqual([]);
        expect(app.get(WorkerLifecycleService).currentState).toBe('idle');
        // The journal and the executor are in the graph, unopened: no folder, no lock, no process.
        const journal = app.get<WorkerJournal>(journalClass, { strict: false });
        expect(journal.isOpen).toBe(false);
        expect(journal.dir).toBe(join(folders, 'journal'));
        expect(app.get<LocalProcessExecutor>(executorClass, { strict: false })).toBeDefined();
        expect(existsSync(folders)).toBe(false);
        const registry = (() => {
          try {
            return app.get(SchedulerRegistry, { strict: false });
          } catch {
            return null; // not in this graph
          }
        })();
        expect(registry === null ? 'absent' : registry.getTimeouts()).toEqual(
          graph === workerGraph ? [] : 'absent',
        );
        // Outside the worker profile the lifecycle has no scheduler and cannot start.
        if (graph !== workerGraph)
          await expect(app.get(WorkerLifecycleService).start()).rejects.toThrow(/QL_PROFILE=worker/);
      } finally {
        await app.close();
      }
    }
    await macrotask();
    expect(await addedOnceSettled(beforeImport)).toEqual(none);
  });
});
