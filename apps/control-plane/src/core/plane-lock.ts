import { existsSync, readFileSync, renameSync, unlinkSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { dirname, resolve } from 'node:path';
import { KernelLock, takeKernelLock } from '@ql/contracts';

/** Another live control plane holds this SQLite file's lock (ADR 0054): exit 2, naming it. */
export class DatabaseInUseError extends Error {
  override readonly name = 'DatabaseInUseError';
}

/** Who holds the lock: for people and messages only (the kernel lock decides). */
interface PlaneOwner {
  readonly pid: number;
  readonly host: string;
  readonly since: string;
  readonly admin?: string;
  readonly ingress?: string;
}

/**
 * One SQLite file has one control plane (issue 29 item 6, ADR 0054): a kernel lock on
 * `<file>.plane-lock` (as the worker's journal, ADR 0029: released by the kernel when its owner dies,
 * however it dies, so no stale lock survives kill -9), held for the process's life, and
 * `<file>.plane.json` naming the owner. CLI commands (api-key, secret, enroll-token …) do not take
 * it: they are short writers, ordered by SQLite's own write lock.
 */
export class PlaneLock {
  private constructor(
    private readonly ownerPath: string,
    private readonly held: KernelLock,
    private owner: PlaneOwner,
  ) {}

  /** The lock of the SQLite file at `path`; undefined when its folder does not exist (the open fails). */
  static acquire(path: string, now: Date): PlaneLock | undefined {
    const file = resolve(path);
    if (!existsSync(dirname(file))) return undefined;
    const ownerPath = `${file}.plane.json`;
    const held = takeKernelLock(`${file}.plane-lock`);
    if (held === null) {
      const who = describeOwner(readOwner(ownerPath));
      throw new DatabaseInUseError(
        `the database ${file} is in use by another control plane (${who}): one SQLite file has one control plane. ` +
          'Stop that one (its Ctrl-C or SIGTERM), or give this one a database of its own (QL_DATABASE_URL, or npm start in another folder)',
      );
    }
    const lock = new PlaneLock(ownerPath, held, { pid: process.pid, host: hostname(), since: now.toISOString() });
    lock.write();
    return lock;
  }

  /** Once listening: the owner file names the addresses too, so a second start can say where it runs. */
  announce(admin: string, ingress: string): void {
    this.owner = { ...this.owner, admin, ingress };
    this.write();
  }

  release(): void {
    if (readOwner(this.ownerPath)?.pid === process.pid) unlinkSync(this.ownerPath);
    if (this.held.open) this.held.close();
  }

  private write(): void {
    writeFileSync(`${this.ownerPath}.tmp`, `${JSON.stringify(this.owner)}\n`, { mode: 0o600 });
    renameSync(`${this.ownerPath}.tmp`, this.ownerPath);
  }
}

/** The file of a `sqlite:` database URL, else undefined (PostgreSQL). */
export function sqlitePathOf(databaseUrl: string): string | undefined {
  return /^sqlite:/.test(databaseUrl) ? databaseUrl.slice('sqlite:'.length).replace(/^\/\//, '') : undefined;
}

function readOwner(path: string): PlaneOwner | undefined {
  try {
    const owner = JSON.parse(readFileSync(path, 'utf8')) as Partial<PlaneOwner>;
    return Number.isSafeInteger(owner.pid) ? (owner as PlaneOwner) : undefined;
  } catch {
    return undefined;
  }
}

function describeOwner(owner: PlaneOwner | undefined): string {
  if (!owner) return 'a process that has not said who it is yet';
  const where = owner.admin ? `, admin ${owner.admin}, ingress ${owner.ingress}` : '';
  return `pid ${owner.pid} on ${owner.host}${where}, since ${owner.since}`;
}
