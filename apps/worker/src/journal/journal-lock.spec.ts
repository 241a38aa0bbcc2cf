import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { currentBootId, identityOf } from '../host/process-table';
import { JournalLockedError } from './journal-lock';
import { WorkerJournal } from './worker-journal';

const REGISTER = resolve(__dirname, '../../test-support/swc-register.js');
const JOURNAL = resolve(__dirname, 'worker-journal.ts');

let dir: string;
let root: string;
beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), 'ql-lock-'));
  dir = join(root, 'journal');
});
afterEach(() => rmSync(root, { recursive: true, force: true }));

const journal = () => new WorkerJournal({ dir, workerId: 'worker-1', maxRecords: 64 });

/** A real second worker process that opens the same journal and holds it until its stdin closes. */
async function holderProcess() {
  const script = `
    const { WorkerJournal } = require(${JSON.stringify(JOURNAL)});
    const j = new WorkerJournal({ dir: ${JSON.stringify(dir)}, workerId: 'worker-9', maxRecords: 64 });
    j.open().then(() => console.log('open'), (e) => { console.log('failed ' + e.message); process.exit(3); });
    process.stdin.on('end', () => j.close().then(() => process.exit(0)));
    process.stdin.resume();`;
  const child = spawn(process.execPath, ['-r', REGISTER, '-e', script], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const [line] = (await once(createInterface({ input: child.stdout! }), 'line')) as [string];
  return { child, line };
}

/** The pid of a process that has certainly exited (and was reaped). */
async function deadPid(): Promise<number> {
  const child = spawn('true');
  await once(child, 'exit');
  return child.pid!;
}

const lockFile = () => join(dir, 'journal.lock');
const writeLock = async (content: object) => {
  await mkdir(dir, { recursive: true, mode: 0o700 });
  writeFileSync(lockFile(), JSON.stringify(content), { mode: 0o600 });
};

/** Opens the journal here and checks the lock names this process, then closes it. */
async function expectOwnedByThisProcess(): Promise<void> {
  const mine = journal();
  await mine.open();
  expect(JSON.parse(readFileSync(lockFile(), 'utf8'))).toMatchObject({
    pid: process.pid,
    workerId: 'worker-1',
  });
  await mine.close();
}

describe('journal single ownership (R-WRK-1)', () => {
  it('a second worker process with the same folder fails clearly while the first lives; opens once it released', async () => {
    const { child, line } = await holderProcess();
    try {
      expect(line).toBe('open');
      const mine = journal();
      await expect(mine.open()).rejects.toThrow(JournalLockedError);
      await expect(mine.open()).rejects.toThrow(
        new RegExp(
          `in use by worker worker-9 \\(pid ${child.pid} on boot .*, since .*\\): a live process holds its kernel lock .*; each worker process needs its own`,
        ),
      );
      expect(mine.isOpen).toBe(false);
    } finally {
      child.stdin!.end();
      await once(child, 'exit');
    }
    const mine = journal();
    await mine.open();
    expect(JSON.parse(readFileSync(lockFile(), 'utf8'))).toMatchObject({ pid: process.pid });
    await mine.close();
  });

  it('a frozen owner (SIGSTOP) keeps the journal: the kernel holds its lock (ADR 0029)', async () => {
    const { child, line } = await holderProcess();
    expect(line).toBe('open');
    child.kill('SIGSTOP');
    try {
      await expect(journal().open()).rejects.toThrow(/in use by worker worker-9 .*kernel lock/);
    } finally {
      child.kill('SIGCONT');
      child.stdin!.end();
      await once(child, 'exit');
    }
  });

  it('a lock file naming a pid that is not alive here does not let a second worker in while the owner holds the kernel lock', async () => {
    const { child } = await holderProcess();
    try {
      // As seen from another PID namespace: the owner's pid names no process (or another one) here.
      const named = JSON.parse(readFileSync(lockFile(), 'utf8')) as Record<string, unknown>;
      writeFileSync(lockFile(), JSON.stringify({ ...named, pid: await deadPid() }));
      await expect(journal().open()).rejects.toThrow(JournalLockedError);
    } finally {
      child.stdin!.end();
      await once(child, 'exit');
    }
  });

  it('a second journal in the same process is refused too', async () => {
    const first = journal();
    await first.open();
    await expect(journal().open()).rejects.toThrow(/in use by worker worker-1 \(pid/);
    await first.close();
    const second = journal();
    await second.open();
    await second.close();
  });

  it('takes over the lock of a worker process that crashed without releasing it', async () => {
    const { child } = await holderProcess();
    child.kill('SIGKILL'); // crash: no close(), the lock file stays
    await once(child, 'exit');
    await expectOwnedByThisProcess();
  });

  it.each([
    ['a pid that no longer exists', async () => ({ ...identityOf(await deadPid()), startTicks: null })],
    ['another boot', async () => ({ ...identityOf(process.pid), bootId: 'another-boot' })],
    [
      'this pid reused by a process that started later',
      async () => ({ ...identityOf(process.pid), startTicks: identityOf(process.pid).startTicks! - 1 }),
    ],
  ])('takes over a stale lock left by %s', async (_name, holder) => {
    expect(currentBootId()).not.toBeNull(); // these checks need /proc (Linux)
    await writeLock({
      ...(await holder()),
      workerId: 'worker-0',
      nonce: 'n',
      since: '2026-01-01T00:00:00.000Z',
    });
    await expectOwnedByThisProcess();
  });

  it('replaces an unreadable lock file once no process holds the kernel lock (the file only informs)', async () => {
    await writeLock({ hello: 'world' });
    await expectOwnedByThisProcess();
  });

  it('still refuses a live worker from before the kernel lock (its lock file has no kernelLock)', async () => {
    await writeLock({ ...identityOf(process.pid), workerId: 'worker-0', nonce: 'n', since: 'then' });
    await expect(journal().open()).rejects.toThrow(/in use by worker worker-0 \(pid \d+, since then\)/);
  });
});
