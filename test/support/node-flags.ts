import { spawnSync } from 'node:child_process';

/** V8 flags a launcher puts on `node`'s command line: flags only, and this node takes them without a word on stderr. */
export function expectQuietNodeFlags(flags: readonly string[]): void {
  expect(flags.length).toBeGreaterThan(0);
  for (const flag of flags) expect(flag).toMatch(/^--[a-z][a-z0-9-]*(=\d+)?$/);
  const run = spawnSync(process.execPath, [...flags, '-e', 'process.stdout.write("ok")'], {
    encoding: 'utf8',
  });
  expect({ status: run.status, stdout: run.stdout, stderr: run.stderr }).toEqual({
    status: 0,
    stdout: 'ok',
    stderr: '',
  });
}
