import { SchedulerRegistry } from '@nestjs/schedule';
import { ScheduledLoop } from './scheduled-loop';

const quiet = { warn: () => undefined };

describe('ScheduledLoop', () => {
  let registry: SchedulerRegistry;
  beforeEach(() => (registry = new SchedulerRegistry()));

  it('registers nothing until started, and nothing at all with interval 0', async () => {
    let cycles = 0;
    const idle = new ScheduledLoop(registry, 'idle', 0, async () => cycles++, quiet);
    idle.start();
    const never = new ScheduledLoop(registry, 'never', 5, async () => cycles++, quiet);
    await new Promise<void>((resolve) => setImmediate(resolve));
    expect(cycles).toBe(0);
    expect(registry.getTimeouts()).toEqual([]);
    await idle.stop();
    await never.stop();
  });

  it('is a named timeout in the registry; cycles never overlap; the timer does not keep the process alive', async () => {
    let running = 0;
    let overlapped = false;
    let done = 0;
    let reached!: () => void;
    const five = new Promise<void>((resolve) => (reached = resolve));
    const loop = new ScheduledLoop(
      registry,
      'sweeper',
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
    loop.start();
    expect(registry.getTimeouts()).toEqual(['sweeper']);
    expect(registry.getTimeout<NodeJS.Timeout>('sweeper').hasRef()).toBe(false);
    await five;
    await loop.stop();
    expect(overlapped).toBe(false);
    expect(registry.getTimeouts()).toEqual([]);
    const after = done;
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(done).toBe(after);
  });

  it('runSoon: a waiting loop cycles at once; during a cycle, the next one follows it at once; never overlapping; ignored when stopped', async () => {
    let cycles = 0;
    let running = 0;
    let overlapped = false;
    let release: (() => void) | undefined;
    const waiters: (() => void)[] = [];
    const next = () => new Promise<void>((resolve) => waiters.push(resolve));
    const loop = new ScheduledLoop(
      registry,
      'puller',
      60_000, // never by the interval within this test
      async () => {
        running++;
        overlapped ||= running > 1;
        cycles++;
        waiters.splice(0).forEach((w) => w());
        await new Promise<void>((resolve) => (release = resolve));
        running--;
      },
      quiet,
    );
    loop.start();
    const first = next();
    loop.runSoon();
    await first;
    expect(cycles).toBe(1);
    // Asked again while that cycle runs: one more, right after it, not beside it.
    loop.runSoon();
    loop.runSoon();
    const second = next();
    release!();
    await second;
    expect({ cycles, overlapped }).toEqual({ cycles: 2, overlapped: false });
    release!();
    // Back to waiting the interval: armed, no cycle running.
    await new Promise<void>((resolve) => setImmediate(resolve));
    expect(registry.getTimeouts()).toEqual(['puller']);
    await loop.stop();
    loop.runSoon();
    expect(registry.getTimeouts()).toEqual([]);
    expect(cycles).toBe(2);
  });

  it('a failing cycle is logged and the loop goes on; stop waits for the cycle in flight', async () => {
    const warnings: unknown[] = [];
    let calls = 0;
    let release!: () => void;
    let inFlight!: () => void;
    const started = new Promise<void>((resolve) => (inFlight = resolve));
    const loop = new ScheduledLoop(
      registry,
      't',
      1,
      async () => {
        calls++;
        if (calls === 1) throw new Error('boom');
        inFlight();
        await new Promise<void>((resolve) => (release = resolve));
      },
      { warn: (m: unknown) => warnings.push(m) },
    );
    loop.start();
    await started;
    expect(loop.armed).toBe(false); // no second cycle is waiting while one runs
    let stopped = false;
    const stopping = loop.stop().then(() => (stopped = true));
    await new Promise((resolve) => setImmediate(resolve));
    expect(stopped).toBe(false);
    release();
    await stopping;
    expect(calls).toBe(2);
    expect(warnings).toHaveLength(1);
    expect(registry.getTimeouts()).toEqual([]);
  });

  it('survives the registry clearing its timeouts first (ScheduleModule at shutdown)', async () => {
    let cycles = 0;
    const loop = new ScheduledLoop(registry, 'cron', 1_000, async () => cycles++, quiet);
    loop.start();
    registry.getTimeouts().forEach((name) => registry.deleteTimeout(name));
    await expect(loop.stop()).resolves.toBeUndefined();
    expect(cycles).toBe(0);
  });
});
