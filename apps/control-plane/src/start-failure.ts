import { ConfigError, ControlPlaneConfig, redactDatabaseUrl } from './config/config';
import { DatabaseInUseError } from './core/plane-lock';

export { redactDatabaseUrl };

/** The control plane's exit codes; the same numbers as the worker's (apps/worker/src/worker-exit.ts). */
export const EXIT = {
  ok: 0,
  /** Start failed (port in use, database unreachable …) or stop failed. */
  failed: 1,
  /** Invalid configuration: fix the environment, restarting will not help. */
  config: 2,
} as const;

export interface StartFailure {
  readonly exitCode: number;
  /** One line for the console: what failed, naming the setting or file, no stack trace. */
  readonly line: string;
}

type NodeError = Error & { code?: string; path?: string; port?: number; address?: string };

/** Turns what stopped a start into one line and an exit code an operator can act on. */
export function describeStartFailure(error: unknown, config?: ControlPlaneConfig): StartFailure {
  if (error instanceof ConfigError)
    return { exitCode: EXIT.config, line: `configuration error: ${error.message}` };
  // Another plane on this SQLite file: restarting cannot help while it runs (ADR 0054).
  if (error instanceof DatabaseInUseError)
    return { exitCode: EXIT.config, line: `control plane failed to start: ${error.message}` };
  const e = (error instanceof Error ? error : new Error(String(error))) as NodeError;
  if (config && e.code === 'EADDRINUSE') {
    const setting = e.port === config.ingressPort ? 'QL_INGRESS_PORT' : 'QL_ADMIN_PORT';
    return {
      exitCode: EXIT.failed,
      line:
        `control plane failed to start: port ${e.port} on ${e.address} (${setting}) is in use — ` +
        'is another control plane running? Stop it or choose another port',
    };
  }
  const pkiFile = config && pkiSetting(config, e.path);
  if (pkiFile && (e.code === 'ENOENT' || e.code === 'EACCES')) {
    return {
      exitCode: EXIT.config,
      line:
        `configuration error: ${pkiFile}=${e.path} cannot be read (${e.code}); ` +
        `create it with \`npm run pki\`, set QL_DEV_PKI=true, or point ${pkiFile} at the file`,
    };
  }
  if (config && isDatabaseError(e)) {
    return {
      exitCode: EXIT.failed,
      line: `control plane failed to start: cannot open the database QL_DATABASE_URL=${redactDatabaseUrl(config.databaseUrl)}: ${e.message}`,
    };
  }
  return { exitCode: EXIT.failed, line: `control plane failed to start: ${e.message}` };
}

function pkiSetting(config: ControlPlaneConfig, path: string | undefined): string | undefined {
  if (path === undefined) return undefined;
  if (path === config.tlsCaPath) return 'QL_TLS_CA';
  if (path === config.tlsCertPath) return 'QL_TLS_CERT';
  if (path === config.tlsKeyPath) return 'QL_TLS_KEY';
  return undefined;
}

/** SQLite errors carry `SQLITE_*` codes; PostgreSQL ones a SQLSTATE and a severity; or the directory is missing. */
function isDatabaseError(e: NodeError): boolean {
  return (
    /^SQLITE_/.test(e.code ?? '') ||
    'severity' in e ||
    /database|ECONNREFUSED/i.test(`${e.message} ${e.code ?? ''}`)
  );
}
