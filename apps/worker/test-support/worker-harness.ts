import { SchedulerRegistry } from '@nestjs/schedule';
import { createIdGenerator } from '@ql/contracts';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import type { HostProbe } from '../src/config/capabilities';
import { WorkerConfig, loadWorkerConfig } from '../src/config/worker-config';
import { LocalProcessExecutor } from '../src/executor/local-process.executor';
import { WorkerJournal } from '../src/journal/worker-journal';
import { WorkerLifecycleService } from '../src/lifecycle/worker-lifecycle.service';
import { JsonLineLog } from '../src/logging/worker-log';
import { RunSupervisor } from '../src/runs/run-supervisor';
import { FakeControlPlane } from './fake-control-plane';

/** A host as the capability detection sees it, fixed for tests. */
export const testProbe: HostProbe = {
  arch: () => 'x64',
  platform: () => 'linux',
  totalMemoryBytes: () => 512 * 1024 * 1024,
  freeDiskBytes: async () => 2048 * 1024 * 1024,
  nodeVersion: () => '20.20.2',
  python3VersionOutput: async () => 'Python 3.11.7',
};

export type LogLine = Record<string, unknown> & { msg: string; level: string };

/** The real lifecycle, supervisor, journal and executor in a temp folder, against a fake control plane. */
export class WorkerHarness {
  readonly root = mkdtempSync(join(tmpdir(), 'ql-runs-'));
  readonly lines: LogLine[] = [];
  readonly config: WorkerConfig;
  readonly journal: WorkerJournal;
  readonly runs: RunSupervisor;
  readonly lifecycle: WorkerLifecycleService;
  readonly scheduler = new SchedulerRegistry();

  constructor(
    readonly plane: FakeControlPlane,
    env: Record<string, string> = {},
    executorPath?: string,
  ) {
    this.config = loadWorkerConfig({
      QL_WORKER_ID: 'worker-a',
      QL_WORKER_HEARTBEAT_MS: '50',
      QL_WORKER_PULL_INTERVAL_MS: '50',
      QL_WORKER_PULL_WAIT_MS: '0', // polling, unless a test asks for the long poll
      QL_WORKER_REQUEST_TIMEOUT_MS: '100',
      QL_WORKER_STOP_BUDGET_MS: '5000',
      QL_WORKER_KILL_GRACE_MS: '200',
      QL_WORKER_JOURNAL_DIR: join(this.root, 'journal'),
      QL_WORKER_WORK_DIR: join(this.root, 'runs'),
      QL_WORKER_BUNDLE_CACHE_DIR: join(this.root, 'bundles'),
      ...env,
    });
    const log = new JsonLineLog('debug', (l) => this.lines.push(JSON.parse(l) as LogLine));
    this.journal = new WorkerJournal({
      dir: this.config.journalDir,
      workerId: this.config.workerId,
      maxRecords: this.config.journalMaxRecords,
    });
    const executor = new LocalProcessExecutor({
      workRoot: this.config.workDir,
      killGraceMs: this.config.killGraceMs,
      outputCapBytes: this.config.outputMaxBytes,
      ...(executorPath ? { path: executorPath } : {}),
    });
    const ids = createIdGenerator();
    this.runs = new RunSupervisor(this.config, this.journal, executor, log, ids, this.scheduler, 20);
    this.lifecycle = new WorkerLifecycleService(
      this.config,
      plane,
      ids,
      log,
      testProbe,
      this.scheduler,
      this.runs,
    );
  }

  messages(): string[] {
    return this.lines.map((l) => l.msg);
  }

  /** Polls `condition` every 10 ms until it holds, failing after `deadlineMs` with the log. */
  async until<T>(
    what: string,
    condition: () => T | undefined | false | Promise<T | undefined | false>,
    deadlineMs = 10_000,
  ): Promise<T> {
    const deadline = Date.now() + deadlineMs;
    for (;;) {
      const value = await condition();
      if (value !== undefined && value !== false) return value;
      if (Date.now() > deadline)
        throw new Error(
          `timed out waiting for ${what}\n${this.lines.map((l) => JSON.stringify(l)).join('\n')}`,
        );
      await delay(10);
    }
  }

  /** Closes whatever is still open (timers, journal lock, processes) and removes the folder. */
  async dispose(): Promise<void> {
    await this.lifecycle.onModuleDestroy();
    rmSync(this.root, { recursive: true, force: true });
  }
}
