import 'reflect-metadata';
import { readFileSync } from 'node:fs';
import { checkEntryArgs, guardStdio, withDeferredDateTimeFormats, writeErr, writeOut } from '@ql/contracts';
import type { SqliteDatabase, SqlitePragmas } from '@ql/persistence';
import { ConfigError, ControlPlaneConfig, loadConfig } from './config/config';
import { PlaneLock, sqlitePathOf } from './core/plane-lock';
import { planeIdentity } from './quickstart-worker-state';
import { EXIT, describeStartFailure } from './start-failure';

/** What the control plane tells a parent that started it with an IPC channel (the quickstart). */
export interface ReadyMessage {
  readonly type: 'control-plane-ready';
  readonly adminUrl: string;
  readonly ingressUrl: string;
  readonly tlsCaPath: string;
  readonly devPkiDir: string;
  /** Its database and CA, digested (quickstart-worker-state.ts): whose worker state the quickstart uses. */
  readonly planeIdentity: string;
  /** Listening, but /readyz is 503 until `npm run migrate` (cluster-control); a `control-plane-migrated` message follows. */
  readonly migrationsPending: boolean;
  /** On SQLite: the page cache, mmap and WAL pragmas in force on the plane's connection. */
  readonly sqlite?: SqlitePragmas;
}

/** Sent after a `ReadyMessage` with `migrationsPending`, once /readyz would answer 200. */
export interface MigratedMessage {
  readonly type: 'control-plane-migrated';
}

/** How often a replica that started before `npm run migrate` looks whether the migrations are applied. */
const MIGRATION_POLL_MS = 1_000;

export const CONTROL_PLANE_USAGE = `usage: npm run start:control-plane   (node dist/apps/control-plane/src/main.js)
Starts the control plane alone on QL_PROFILE (standalone: SQLite, migrated on start; cluster-control:
PostgreSQL): the admin API and probes (QL_ADMIN_PORT, 8080) and the worker ingress (QL_INGRESS_PORT,
8443, mTLS). It takes no arguments: settings are QL_* environment variables (npm run config-docs).
SIGTERM, SIGINT or SIGHUP (the terminal closed) stops it: not ready, listeners closed, exit 0.`;

/** `npm run start:control-plane`: the control plane on the configured profile (standalone SQLite by default). */
async function main(): Promise<void> {
  const usage = checkEntryArgs(process.argv.slice(2), CONTROL_PLANE_USAGE);
  if (usage !== undefined) process.exit(usage);
  guardStdio();
  let config: ControlPlaneConfig | undefined;
  try {
    config = loadConfig();
    if (config.profile === 'worker')
      throw new ConfigError(
        'QL_PROFILE=worker runs the headless worker (npm run start:worker), not the control plane',
      );
    await run(config);
  } catch (error) {
    const failure = describeStartFailure(error, config);
    writeErr(`${failure.line}\n`);
    process.exit(failure.exitCode);
  }
}

async function run(config: ControlPlaneConfig): Promise<void> {
  // Loaded after the settings are checked: a configuration error is reported without loading Nest.
  // Nest's never-used logger date formatters are built only if used (ADR 0024).
  const { startControlPlane } = withDeferredDateTimeFormats(
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    () => require('./bootstrap') as typeof import('./bootstrap'),
  );
  // One SQLite file has one control plane (ADR 0054): taken before the file is opened or migrated.
  const sqlitePath = sqlitePathOf(config.databaseUrl);
  const lock = sqlitePath ? PlaneLock.acquire(sqlitePath, new Date()) : undefined;
  const plane = await startControlPlane(config);
  lock?.announce(plane.adminUrl, plane.ingressUrl);
  // Also the first round trip to the database (a PostgreSQL pool connects lazily): fail before "ready".
  const migrated = await plane.core.db.migrationsApplied();
  const log = (msg: string, fields: Record<string, unknown> = {}, level = 'info') =>
    writeOut(`${JSON.stringify({ time: new Date().toISOString(), level, msg, ...fields })}\n`);
  // Stops cleanly from here on: a signal right after the "ready" line below is a clean stop too.
  let migrationPoll: NodeJS.Timeout | undefined;
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    clearTimeout(migrationPoll);
    log('shutting down', { signal });
    const timer = setTimeout(() => process.exit(EXIT.failed), config.shutdownGraceMs + 1000);
    timer.unref();
    plane.close().then(
      () => {
        lock?.release();
        process.exit(EXIT.ok);
      },
      () => process.exit(EXIT.failed),
    );
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGHUP', () => stop('SIGHUP'));
  // On SQLite, the page cache, mmap and WAL pragmas in force (ADR 0053). A type-only import:
  // persistence is loaded with Nest, after the settings are checked.
  const sqlite = plane.core.db.dialect === 'sqlite' ? (plane.core.db as SqliteDatabase).pragmas() : undefined;
  const where = {
    profile: config.profile,
    database: plane.core.db.dialect,
    ...(sqlite ? { sqlite } : {}),
    admin: plane.adminUrl,
    ingress: plane.ingressUrl,
  };
  // "ready" only when /readyz would answer 200: a replica on an un-migrated database listens (probes
  // and the admin API answer) but is not ready until `npm run migrate` has run (issue 16).
  log(migrated ? 'control plane ready' : 'control plane listening; not ready: migrations pending', where);
  if (!migrated) {
    log(
      'migrations pending: run `npm run migrate` with this QL_DATABASE_URL; until then /readyz is 503 and the sweeper and cron wait',
      {},
      'warn',
    );
    const poll = async () => {
      const applied = await plane.core.db.migrationsApplied().catch(() => false);
      if (!applied) {
        migrationPoll = setTimeout(() => void poll(), MIGRATION_POLL_MS);
        return;
      }
      log('control plane ready', { ...where, migrations: 'applied' });
      if (process.send) process.send({ type: 'control-plane-migrated' } satisfies MigratedMessage);
    };
    migrationPoll = setTimeout(() => void poll(), MIGRATION_POLL_MS);
  }
  if (config.profile === 'standalone' && process.stdout.isTTY !== false) {
    writeOut(
      [
        '',
        `  Admin API + probes : ${plane.adminUrl}   (GET /readyz, GET /openapi.json, Swagger UI at /docs)`,
        `  Web console        : ${plane.adminUrl}/  (sign in with an API key)`,
        `  Worker ingress     : ${plane.ingressUrl} (mTLS, CA ${config.tlsCaPath})`,
        `  First API key      : npm run api-key -- --name me --role admin`,
        `  More workers       : npm run -s enroll-token -- create --worker <id>, then on the machine`,
        `                       QL_PROFILE=worker QL_WORKER_ID=<id> QL_WORKER_ENROLL_TOKEN=<token> QL_WORKER_CONTROL_PLANE_URL=${plane.ingressUrl} QL_WORKER_TLS_CA=${config.tlsCaPath} bin/ql-worker`,
        `                       (README, "Adding a worker machine")`,
        '',
      ].join('\n'),
    );
  }
  if (process.send) {
    const ready: ReadyMessage = {
      type: 'control-plane-ready',
      adminUrl: plane.adminUrl,
      ingressUrl: plane.ingressUrl,
      tlsCaPath: config.tlsCaPath,
      devPkiDir: config.devPkiDir,
      planeIdentity: planeIdentity(config.databaseUrl, readFileSync(config.tlsCaPath)),
      migrationsPending: !migrated,
      ...(sqlite ? { sqlite } : {}),
    };
    process.send(ready);
    // The parent that started us is gone (even by SIGKILL): do not outlive it holding the ports.
    process.on('disconnect', () => stop('parent exited'));
  }
}

void main();
