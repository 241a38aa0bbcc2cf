import { createIdGenerator } from '@ql/contracts';
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { driveNewRecord } from '../../test-support/journal-fixtures';
import { sweepLeftoverCgroups } from '../executor/leftover-group';
import { ATTEMPT_MARKER } from '../executor/local-process.executor';
import { RunCgroups, parseMountinfo } from '../host/cgroup';
import { waitGroupGone } from '../host/process-table';
import { WorkerJournal } from '../journal/worker-journal';
import { JsonLineLog } from '../logging/worker-log';
import type { LeaseChannel } from './lease-channel';
import { recoverJournal } from './restart-recovery';

/**
 * ADR 0030: at restart, after the journal scan, the worker sweeps its own cgroup folder. What the scan
 * kills nothing for — a `launching` record (no process recorded) whose attempt cgroup holds a running
 * task, an empty attempt cgroup no record names — is gone before the first pull.
 */
const ids = createIdGenerator();
const mount = parseMountinfo(readFileSync('/proc/self/mountinfo', 'utf8')).find(
  (m) => m.fsType === 'cgroup2',
);
if (!mount) throw new Error('these tests need a writable cgroup v2 mount, as this host has');
const base = join(mount.point, `ql-test-restart-${process.pid}`);
const cgroups = new RunCgroups(join(base, 'worker-a'), false, base);

/** No lease call is expected: a `launching` record is marked, not reported. */
const noCalls: LeaseChannel = {
  leaseCall: () => Promise.reject(new Error('no lease call expected')),
  toLocalTime: (serverMs) => serverMs,
};

let scratch: string;
beforeEach(() => (scratch = mkdtempSync(join(tmpdir(), 'ql-restart-cgroups-'))));
afterEach(() => rmSync(scratch, { recursive: true, force: true }));
afterAll(async () => {
  await sweepLeftoverCgroups(cgroups, 0);
  cgroups.removeIfEmpty();
});

it("sweeps the worker's cgroup folder at restart: a launch_interrupted attempt's running task is killed, a stray empty cgroup removed", async () => {
  const journal = new WorkerJournal({ dir: join(scratch, 'journal'), workerId: 'worker-a', maxRecords: 64 });
  await journal.open();
  try {
    const record = await driveNewRecord(journal, 'launching');
    mkdirSync(cgroups.base, { recursive: true });
    const cgroup = cgroups.create(record.attemptId);
    const task = spawn('sleep', ['60'], {
      detached: true,
      stdio: 'ignore',
      env: { [ATTEMPT_MARKER]: record.attemptId },
    });
    await new Promise((resolve) => task.once('spawn', resolve));
    cgroup.adopt(task.pid!);
    task.unref();
    const stray = ids.uuidV7();
    cgroups.create(stray);
    const lines: Record<string, unknown>[] = [];
    const result = await recoverJournal({
      channel: noCalls,
      journal,
      log: new JsonLineLog('debug', (l) => lines.push(JSON.parse(l) as Record<string, unknown>)),
      killGraceMs: 300,
      retryMs: 20,
      signal: new AbortController().signal,
      cgroups,
    });
    // The record still waits for an operator (its launch was interrupted); its task no longer runs.
    expect(result.recoveryRequired).toEqual({ offerId: record.offerId, reason: 'launch_interrupted' });
    expect(await waitGroupGone(task.pid!, 5_000)).toBe(true);
    expect({ left: cgroups.attempts(), cgroup: existsSync(cgroup.path) }).toEqual({
      left: [],
      cgroup: false,
    });
    const swept = lines.filter((l) => l.msg === "a predecessor's attempt cgroup, swept at start");
    expect(swept.map((l) => [l.attemptId, l.verdict])).toEqual(
      expect.arrayContaining([
        [record.attemptId, 'killed'],
        [stray, 'gone'],
      ]),
    );
  } finally {
    await journal.close();
  }
});
