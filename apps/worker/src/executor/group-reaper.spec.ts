import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { monotonicNow } from '../host/monotonic';
import { groupAlive, liveGroupMembers, signalGroup, waitGroupGone } from '../host/process-table';
import { GroupReaper } from './group-reaper';

const ROOT = resolve(__dirname, '..', '..', '..', '..');

describe('GroupReaper: run groups do not outlive a worker killed with -9', () => {
  it.each([0, 60_000])(
    'kill -9 of the owner (linger %i ms): the tracked group is killed at once, the untracked one is left alone, the reaper exits',
    async (lingerMs) => {
      const owner = spawn(
        process.execPath,
        ['-r', './apps/worker/test-support/swc-register.js', 'apps/worker/test-support/reaper-owner.ts'],
        {
          cwd: ROOT,
          stdio: ['ignore', 'pipe', 'inherit'],
          env: { ...process.env, REAPER_LINGER_MS: String(lingerMs) },
        },
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
    },
  );

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

  it('with a linger: a run within it reuses the same reaper; after it the reaper is released and ends', async () => {
    const reaper = new GroupReaper(undefined, 300);
    const launch = () => spawn('/bin/sh', ['-c', 'sleep 120'], { detached: true, stdio: 'ignore' }).pid!;
    const first = launch();
    const second = launch();
    try {
      reaper.track(first);
      const pid = reaper.pid!;
      reaper.untrack(first);
      expect(reaper.pid).toBe(pid);
      reaper.track(second);
      expect(reaper.pid).toBe(pid);
      const released = once(reaper, 'released');
      reaper.untrack(second);
      expect(reaper.pid).toBe(pid);
      expect(await released).toEqual([pid]);
      expect(reaper.pid).toBeUndefined();
      expect(await waitGroupGone(pid, 5000)).toBe(true);
      expect(groupAlive(first)).toBe(true);
      expect(groupAlive(second)).toBe(true);
    } finally {
      signalGroup(first, 'SIGKILL');
      signalGroup(second, 'SIGKILL');
    }
  });

  it('a run tracked within the linger holds the reaper however long it runs; the linger starts again at its end', async () => {
    jest.useFakeTimers({ doNotFake: ['nextTick', 'setImmediate', 'queueMicrotask'] });
    const reaper = new GroupReaper(undefined, 300);
    const releases: (number | undefined)[] = [];
    reaper.on('released', (pid) => releases.push(pid));
    const group = spawn('/bin/sh', ['-c', 'sleep 120'], { detached: true, stdio: 'ignore' }).pid!;
    let pid: number | undefined;
    try {
      reaper.track(group);
      pid = reaper.pid!;
      reaper.untrack(group);
      reaper.track(group);
      jest.advanceTimersByTime(10_000);
      expect(releases).toEqual([]);
      expect(reaper.pid).toBe(pid);
      reaper.untrack(group);
      jest.advanceTimersByTime(299);
      expect(releases).toEqual([]);
      jest.advanceTimersByTime(1);
      expect(releases).toEqual([pid]);
    } finally {
      jest.useRealTimers();
      reaper.release();
      signalGroup(group, 'SIGKILL');
    }
    expect(await waitGroupGone(pid!, 5000)).toBe(true);
  });
});

/** A process group of its own that runs until killed. */
const sleeper = () => spawn('/bin/sh', ['-c', 'sleep 120'], { detached: true, stdio: 'ignore' }).pid!;

describe("GroupReaper: the dead man's switch (`@pgid seconds`, ADR 0028)", () => {
  it('an armed group is SIGKILLed when its time passes, with its worker alive and doing nothing; a group not armed is left', async () => {
    const reaper = new GroupReaper();
    const [armed, other] = [sleeper(), sleeper()];
    try {
      reaper.track(armed);
      reaper.track(other);
      reaper.arm(armed, monotonicNow() + 300);
      expect(await waitGroupGone(armed, 10_000)).toBe(true);
      expect(groupAlive(other)).toBe(true);
    } finally {
      reaper.release();
      signalGroup(armed, 'SIGKILL');
      signalGroup(other, 'SIGKILL');
    }
  });

  it('armed again (a renewal) or untracked, the earlier time passes without a kill', async () => {
    const reaper = new GroupReaper();
    const [renewed, untracked, witness] = [sleeper(), sleeper(), sleeper()];
    try {
      for (const g of [renewed, untracked, witness]) reaper.track(g);
      reaper.arm(renewed, monotonicNow() + 200);
      reaper.arm(untracked, monotonicNow() + 200);
      reaper.arm(renewed, monotonicNow() + 60_000);
      reaper.untrack(untracked);
      // The witness's switch, armed after theirs and due 0.8 s later: had theirs not been disarmed,
      // they would be dead well before it.
      reaper.arm(witness, monotonicNow() + 1_000);
      expect(await waitGroupGone(witness, 10_000)).toBe(true);
      expect({ renewed: groupAlive(renewed), untracked: groupAlive(untracked) }).toEqual({
        renewed: true,
        untracked: true,
      });
    } finally {
      reaper.release();
      for (const g of [renewed, untracked, witness]) signalGroup(g, 'SIGKILL');
    }
  });

  it('re-armed many times in a row, then released: no `sleep` of a disarmed switch outlives the reaper', async () => {
    // Each `@` line disarms the sleeper the line before started, often while it is still forking its
    // `sleep`: a SIGTERM landing in that child before it dropped the copied trap was lost (orphans).
    const reaper = new GroupReaper();
    const group = sleeper();
    reaper.track(group);
    const pid = reaper.pid!;
    try {
      for (let i = 0; i < 200; i++) reaper.arm(group, monotonicNow() + 60_000);
      reaper.untrack(group); // the last group: the reaper is released and exits
      // Its subshells and their sleeps are in its process group (no job control in `sh -c`).
      const gone = await waitGroupGone(pid, 10_000);
      expect({ gone, left: gone ? [] : liveGroupMembers(pid) }).toEqual({ gone: true, left: [] });
      expect(groupAlive(group)).toBe(true);
    } finally {
      signalGroup(pid, 'SIGKILL');
      signalGroup(group, 'SIGKILL');
    }
  });
});
