// The kernel lock (ADR 0029, ADR 0059) through either SQLite: better-sqlite3, and Node's own
// node:sqlite where the native module cannot load (arm64, another Node's ABI). Real processes: an
// fcntl lock excludes other processes, never this one, so every holder here is a child.
import { ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { otherNode } from '../../../test/support/other-node';
import { kernelLockDriver, takeKernelLock } from './kernel-lock';

const REGISTER = resolve(__dirname, '../../../apps/worker/test-support/swc-register.js');
const MODULE = resolve(__dirname, 'kernel-lock.ts');

jest.setTimeout(60_000);

let root: string;
/** Another Node than this one (its ABI differs: this better-sqlite3 build does not load there). */
let foreign: string;
beforeAll(() => {
  foreign = otherNode(process.versions.node.startsWith('24.') ? 22 : 24);
});
beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), 'ql-kernel-lock-'));
});
afterEach(() => rmSync(root, { recursive: true, force: true }));

/**
 * A process on `node` that takes the lock on `path` (with `driver`, or the default choice) and says
 * which driver held it, or `busy`; it holds until killed.
 */
async function holder(node: string, path: string, driver?: string) {
  const script = `
    const { takeKernelLock, kernelLockDriver } = require(${JSON.stringify(MODULE)});
    const held = takeKernelLock(${JSON.stringify(path)}${driver ? `, ${JSON.stringify(driver)}` : ''});
    console.log(held ? 'held ' + (${JSON.stringify(driver ?? '')} || kernelLockDriver()) : 'busy');
    setInterval(() => undefined, 60_000);`;
  const child = spawn(node, ['--no-warnings', '-r', REGISTER, '-e', script], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const [line] = (await once(createInterface({ input: child.stdout! }), 'line')) as [string];
  return { child, line };
}

async function killed(child: ChildProcess): Promise<void> {
  child.kill('SIGKILL');
  if (child.exitCode === null && child.signalCode === null) await once(child, 'exit');
}

describe('the kernel lock, either SQLite', () => {
  it('here (better-sqlite3 built for this Node): better-sqlite3 is the driver; the file is 0600', () => {
    const path = join(root, 'journal.lock.sqlite');
    const held = takeKernelLock(path)!;
    expect(kernelLockDriver()).toBe('better-sqlite3');
    expect(statSync(path).mode & 0o777).toBe(0o600);
    held.close();
    expect(held.open).toBe(false);
  });

  it('on another Node a better-sqlite3 built for this one does not load: node:sqlite takes the lock instead', async () => {
    const { child, line } = await holder(foreign, join(root, 'lock'));
    try {
      expect(line).toBe('held node:sqlite');
    } finally {
      await killed(child);
    }
  });

  it.each([
    ['node:sqlite (another Node) holds: better-sqlite3 here is refused', 'node:sqlite'],
    ['better-sqlite3 here holds: node:sqlite (another Node) is refused', 'better-sqlite3'],
  ])('%s until the holder dies or lets go, then the other takes it', async (_what, first) => {
    const path = join(root, 'lock');
    if (first === 'node:sqlite') {
      const { child, line } = await holder(foreign, path, 'node:sqlite');
      expect(line).toBe('held node:sqlite');
      expect(takeKernelLock(path, 'better-sqlite3')).toBeNull();
      await killed(child);
      const mine = takeKernelLock(path, 'better-sqlite3');
      expect(mine?.open).toBe(true);
      mine!.close();
    } else {
      const mine = takeKernelLock(path, 'better-sqlite3')!;
      const refused = await holder(foreign, path, 'node:sqlite');
      expect(refused.line).toBe('busy');
      await killed(refused.child);
      mine.close(); // released: the next process takes it
      const next = await holder(foreign, path, 'node:sqlite');
      expect(next.line).toBe('held node:sqlite');
      await killed(next.child);
    }
  });

  it('two node:sqlite processes exclude each other', async () => {
    const path = join(root, 'lock');
    const first = await holder(foreign, path, 'node:sqlite');
    const second = await holder(foreign, path, 'node:sqlite');
    try {
      expect([first.line, second.line]).toEqual(['held node:sqlite', 'busy']);
    } finally {
      await killed(first.child);
      await killed(second.child);
    }
  });
});
