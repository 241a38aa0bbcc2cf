import { createHash, X509Certificate } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { sqlitePathOf } from './core/plane-lock';

/**
 * Which control plane a quickstart worker's state belongs to (issue 29 item 8): its database (the
 * SQLite file's absolute path; a PostgreSQL server and database, without user or password) and the CA
 * its ingress certificate chains to. A certificate is renewed only by the plane whose database
 * issued it, and a journal names that plane's runs: a quickstart started on another database (or
 * another CA) must not present them. 12 hex digits of a SHA-256, the same on every start.
 */
export function planeIdentity(databaseUrl: string, caPem: Buffer): string {
  const sqlite = sqlitePathOf(databaseUrl);
  let database: string;
  if (sqlite !== undefined) database = `sqlite:${resolve(sqlite)}`;
  else {
    const url = new URL(databaseUrl);
    database = `postgres://${url.hostname}:${url.port || '5432'}${url.pathname}`;
  }
  const ca = new X509Certificate(caPem).fingerprint256;
  return createHash('sha256').update(`${database}\n${ca}`).digest('hex').slice(0, 12);
}

/** The file in a worker's state folder that names the plane it belongs to. */
export const PLANE_RECORD = 'control-plane';

/**
 * The quickstart worker's state folder under `root` (`./var/worker` by default) for the plane
 * `identity`: `<root>/<workerId>` when it is that plane's (or new, or made before planes were
 * recorded: it is adopted), else `<root>/<workerId>@<identity>`, so each plane keeps its own key,
 * certificate, journal and work folders and switching back finds them as they were. `moved` says
 * the state is not the usual folder, and why.
 */
export function quickstartWorkerState(
  root: string,
  workerId: string,
  identity: string,
): { folder: string; moved: boolean } {
  const usual = join(root, workerId);
  const owner = readRecord(usual);
  if (owner === undefined || owner === identity) {
    claim(usual, identity);
    return { folder: usual, moved: false };
  }
  const keyed = join(root, `${workerId}@${identity}`);
  claim(keyed, identity);
  return { folder: keyed, moved: true };
}

function readRecord(folder: string): string | undefined {
  try {
    return readFileSync(join(folder, PLANE_RECORD), 'utf8').trim();
  } catch {
    return undefined;
  }
}

function claim(folder: string, identity: string): void {
  mkdirSync(folder, { recursive: true, mode: 0o700 });
  if (!existsSync(join(folder, PLANE_RECORD))) writeFileSync(join(folder, PLANE_RECORD), `${identity}\n`);
}
