import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { spawnLoops } from '../../bench/spawn-ceiling-child';
import { cpuPerRun, parseProcStat, perPidDelta, processTreeCpuMs, readCpu } from '../../bench/lib/proc-cpu';

/** A /proc/<pid>/stat line: 52 fields, with the given command name and times (ticks). */
function statLine(
  comm: string,
  t: { ppid: number; utime: number; stime: number; cutime: number; cstime: number },
) {
  const rest = Array.from({ length: 50 }, () => '0');
  rest[0] = 'S';
  rest[1] = String(t.ppid);
  rest[11] = String(t.utime);
  rest[12] = String(t.stime);
  rest[13] = String(t.cutime);
  rest[14] = String(t.cstime);
  return `4242 (${comm}) ${rest.join(' ')}\n`;
}

/** A Node child that burns ~`ms` of CPU, prints its own CPU ms, then waits for its stdin to close. */
function burner(ms: number) {
  const child = spawn(
    process.execPath,
    [
      '-e',
      `const t = Date.now(); while (Date.now() - t < ${ms}) {}
       const u = process.cpuUsage(); console.log((u.user + u.system) / 1000);
       process.stdin.resume(); process.stdin.on('end', () => process.exit(0));`,
    ],
    { stdio: ['pipe', 'pipe', 'inherit'] },
  );
  const reported = new Promise<number>((resolve) =>
    child.stdout.once('data', (chunk: Buffer) => resolve(Number(chunk.toString().trim()))),
  );
  return { child, reported };
}

describe('bench /proc CPU reading (dispatch CPU per run by component)', () => {
  it('parses the fields after the command name, even when it holds spaces and parentheses', () => {
    const stat = parseProcStat(
      statLine('sh -c (x) y', { ppid: 7, utime: 11, stime: 12, cutime: 13, cstime: 14 }),
    );
    expect(stat).toEqual({
      pid: 4242,
      comm: 'sh -c (x) y',
      state: 'S',
      ppid: 7,
      utime: 11,
      stime: 12,
      cutime: 13,
      cstime: 14,
    });
  });

  it('refuses a line that is not a stat line, or whose time field is not a count', () => {
    expect(() => parseProcStat('no parentheses here')).toThrow(/not a \/proc/);
    const bad = statLine('x', { ppid: 1, utime: 1, stime: 2, cutime: 3, cstime: 4 }).replace(
      ' 1 2 3 4 ',
      ' 1 2 x 4 ',
    );
    expect(() => parseProcStat(bad)).toThrow(/field 16/);
  });

  it("counts a live child's CPU, and counts it once more neither while it lives nor after it is reaped", async () => {
    const before = processTreeCpuMs('self');
    const { child, reported } = burner(300);
    const childMs = await reported;
    const live = processTreeCpuMs('self');
    // 10 ms clock ticks: allow two of them either way.
    expect(live.children - before.children).toBeGreaterThanOrEqual(childMs - 20);
    expect(live.children - before.children).toBeLessThan(childMs + 200);
    const exited = once(child, 'exit');
    child.stdin.end();
    await exited;
    const reaped = processTreeCpuMs('self');
    expect(reaped.children - before.children).toBeGreaterThanOrEqual(childMs - 20);
    expect(reaped.children - live.children).toBeLessThan(100);
  });

  it('divides each component by the runs and totals them; refuses no runs and a missing reading', () => {
    let plane = 100;
    const components = { plane: () => plane, worker: () => 2 * plane };
    const a = readCpu(components);
    plane = 160;
    const b = readCpu(components);
    expect(cpuPerRun(a, b, 30)).toEqual({ plane: 2, worker: 4, total: 6 });
    expect(() => cpuPerRun(a, b, 0)).toThrow(/runs must be > 0/);
    expect(() => cpuPerRun(a, { plane: 1 }, 1)).toThrow(/no second reading of "worker"/);
  });

  it('per-pid CPU: a pid new in the second reading counts from 0, one gone from it is left out', () => {
    const before = new Map([
      [10, 100],
      [11, 50],
    ]);
    const after = new Map([
      [10, 130],
      [12, 7],
    ]);
    expect(perPidDelta(before, after)).toBe(37);
  });

  it('the spawn ceiling loops count every no-op spawn and their CPU as children', async () => {
    const result = await spawnLoops(2, 40, 2);
    expect(result.spawns).toBe(40);
    expect(result.spawnsPerSecond).toBeGreaterThan(0);
    expect(result.childCpuMsPerSpawn).toBeGreaterThan(0);
    expect(result.parentCpuMsPerSpawn).toBeGreaterThan(0);
  });
});
