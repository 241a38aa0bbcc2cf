import { PeriodicWork } from './periodic-work';

const quiet = { warn: () => undefined } as never;

describe('PeriodicWork', () => {
  it('does nothing until started, and nothing at all with interval 0', async () => {
    let cycles = 0;
    const idle = new PeriodicWork('t', 0, async () => cycles++, quiet);
    idle.start();
    const never = new PeriodicWork('t', 5, async () => cycles++, quiet);
    await new Promise<void>((resolve) => setImmediate(resolve));
    expect(cycles).toBe(0);
    await idle.stop();
    await never.stop();
  });

  it('cycles never overlap, and the timer does not keep the process alive', async () => {
    let running = 0;
    let overlapped = false;
    let done = 0;
    let reached!: () => void;
    const five = new Promise<void>((resolve) => (reached = resolve));
    const work = new PeriodicWork(
      't',
      1,
      async () => {
        running++;
        overlapped ||= running > 1;
        await new Promise((resolve) => setTimeout(resolve, 5));
        running--;
        if (++done === 5) reached();
      },
      quiet,
    );
    work.start();
    const timer = (work as unknown as { timer: NodeJS.Timeout }).timer;
    expect(timer.hasRef()).toBe(false);
    await five;
    await work.stop();
    expect(overlapped).toBe(false);
    const after = done;
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(done).toBe(after);
  });

  it('a failing cycle is logged and the loop goes on; stop waits for the cycle in flight', async () => {
    const warnings: unknown[] = [];
    let calls = 0;
    let release!: () => void;
    let inFlight!: () => void;
    const started = new Promise<void>((resolve) => (inFlight = resolve));
    const work = new PeriodicWork(
      't',
      1,
      async () => {
        calls++;
        if (calls === 1) throw new Error('boom');
        inFlight();
        await new Promise<void>((resolve) => (release = resolve));
      },
      { warn: (m: unknown) => warnings.push(m) } as never,
    );
    work.start();
    await started;
    let stopped = false;
    const stopping = work.stop().then(() => (stopped = true));
    await new Promise((resolve) => setImmediate(resolve));
    expect(stopped).toBe(false);
    release();
    await stopping;
    expect(calls).toBe(2);
    expect(warnings).toHaveLength(1);
  });
});
