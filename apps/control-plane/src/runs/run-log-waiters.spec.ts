import { RunLogWaiters } from './run-log-waiters';

/** Long enough that no test here ends by its timer: each must end by the event it is about. */
const NEVER_MS = 60_000;

describe('RunLogWaiters', () => {
  it('a notify for the run wakes its waits at once and leaves the others waiting', async () => {
    const waiters = new RunLogWaiters();
    const live = new AbortController();
    const woken = waiters.wait('run-1', NEVER_MS, live.signal);
    let otherDone = false;
    const other = waiters.wait('run-2', NEVER_MS, live.signal).then((r) => ((otherDone = true), r));
    waiters.notify('run-1');
    await expect(woken).resolves.toBe(true);
    expect(otherDone).toBe(false);
    waiters.close();
    await expect(other).resolves.toBe(false);
  });

  it('an abort answers false at once; so does a wait begun after close', async () => {
    const waiters = new RunLogWaiters();
    const gone = new AbortController();
    const waiting = waiters.wait('run-1', NEVER_MS, gone.signal);
    gone.abort();
    await expect(waiting).resolves.toBe(false);
    waiters.close();
    await expect(waiters.wait('run-1', NEVER_MS, new AbortController().signal)).resolves.toBe(false);
  });

  it('the timer ends a wait with true, and hold counts a tail only while it runs', async () => {
    const waiters = new RunLogWaiters();
    const held = waiters.hold(() => waiters.wait('run-1', 1, new AbortController().signal));
    expect(waiters.size).toBe(1);
    await expect(held).resolves.toBe(true);
    expect(waiters.size).toBe(0);
    await expect(waiters.hold(() => Promise.reject(new Error('read failed')))).rejects.toThrow('read failed');
    expect(waiters.size).toBe(0);
  });
});
