import { spawn } from 'node:child_process';
import { once } from 'node:events';
import type * as Fs from 'node:fs';
import { currentBootId, groupAlive, liveGroupMembers, signalGroup } from './process-table';

/** liveGroupMembers, counting how often the `/proc` scan ran. */
function countingScan(): { scan: (pgid: number) => number[]; readonly count: number } {
  let count = 0;
  return {
    scan: (pgid) => {
      count += 1;
      return liveGroupMembers(pgid);
    },
    get count() {
      return count;
    },
  };
}

describe('groupAlive: the kernel is asked before /proc is scanned', () => {
  it('a group that has ended is reported gone without a /proc scan', async () => {
    const child = spawn('/bin/sh', ['-c', 'exit 0'], { detached: true, stdio: 'ignore' });
    const pgid = child.pid!;
    await once(child, 'exit');
    const counter = countingScan();
    expect(groupAlive(pgid, counter.scan)).toBe(false);
    expect(counter.count).toBe(0);
  });

  it('a live group is still scanned and reported live', async () => {
    const child = spawn('/bin/sh', ['-c', 'exec sleep 120'], { detached: true, stdio: 'ignore' });
    const pgid = child.pid!;
    try {
      const counter = countingScan();
      expect(groupAlive(pgid, counter.scan)).toBe(true);
      expect(counter.count).toBe(1);
    } finally {
      signalGroup(pgid, 'SIGKILL');
      await once(child, 'exit');
    }
  });

  it('a group the kernel still knows is scanned, and the scan decides (zombie-only groups are gone)', async () => {
    const child = spawn('/bin/sh', ['-c', 'exec sleep 120'], { detached: true, stdio: 'ignore' });
    const pgid = child.pid!;
    try {
      let scans = 0;
      expect(groupAlive(pgid, () => ((scans += 1), []))).toBe(false);
      expect(scans).toBe(1);
    } finally {
      signalGroup(pgid, 'SIGKILL');
      await once(child, 'exit');
    }
  });
});

describe('currentBootId', () => {
  it("reads the kernel's boot id once per process (every run records it)", () => {
    const first = currentBootId();
    expect(first).toMatch(/^[0-9a-f-]{36}$/); // these checks need /proc (Linux)
    // The module object process-table calls into (an `import *` would be a copy of it).
    const reads = jest.spyOn(jest.requireActual<typeof Fs>('node:fs'), 'readFileSync');
    try {
      expect([currentBootId(), currentBootId()]).toEqual([first, first]);
      expect(reads).not.toHaveBeenCalled();
    } finally {
      reads.mockRestore();
    }
  });
});
