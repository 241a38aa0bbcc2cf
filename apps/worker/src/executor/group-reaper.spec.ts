import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { groupAlive, signalGroup, waitGroupGone } from '../host/process-table';
import { GroupReaper } from './group-reaper';

const ROOT = resolve(__dirname, '..', '..', '..', '..');

describe('GroupReaper: run groups do not outlive a worker killed with -9', () => {
  it('kill -9 of the owner: the tracked group is killed at once, the untracked one is left alone, the reaper exits', async () => {
    const owner = spawn(
      process.execPath,
      ['-r', './apps/worker/test-support/swc-register.js', 'apps/worker/test-support/reaper-owner.ts'],
      { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] },
    );
    const [line] = (await once(createInterface({ input: owner.stdout! }), 'line')) as [string];
    const { tracked, untracked, reaper } = JSON.parse(line) as Record<string, number>;
    try {
      expect(groupAlive(tracked)).toBe(true);
      owner.kill('SIGKILL');
      await once(owner, 'exit');
      expect(await waitGroupGone(tracked, 5000)).toBe(true);
      expect(await waitGroupGone(reaper, 5000)).toBe(true);
      expect(groupAlive(untracked)).toBe(true);
    } finally {
      signalGroup(tracked, 'SIGKILL');
      signalGroup(untracked, 'SIGKILL');
    }
  });

  it('holds no process while nothing is tracked; ends when the last group is untracked, killing nothing', async () => {
    const reaper = new GroupReaper();
    expect(reaper.pid).toBeUndefined();
    const group = spawn('/bin/sh', ['-c', 'sleep 120'], { detached: true, stdio: 'ignore' }).pid!;
    try {
      reaper.track(group);
      const pid = reaper.pid!;
      expect(groupAlive(pid)).toBe(true);
      reaper.untrack(group);
      expect(reaper.pid).toBeUndefined();
      expect(await waitGroupGone(pid, 5000)).toBe(true);
      expect(groupAlive(group)).toBe(true);
    } finally {
      signalGroup(group, 'SIGKILL');
    }
  });
});
