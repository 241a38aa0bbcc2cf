import 'reflect-metadata';
import { ConfigError, loadConfig } from './config/config';
import { startControlPlane } from './bootstrap';

/** `npm start`: the control plane on the configured profile (standalone SQLite by default). */
async function main(): Promise<void> {
  let config;
  try {
    config = loadConfig();
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`configuration error: ${error.message}\n`);
      process.exit(2);
    }
    throw error;
  }
  const plane = await startControlPlane(config);
  const log = (msg: string, fields: Record<string, unknown> = {}) =>
    process.stdout.write(
      `${JSON.stringify({ time: new Date().toISOString(), level: 'info', msg, ...fields })}\n`,
    );
  log('control plane ready', {
    profile: config.profile,
    database: plane.core.db.dialect,
    admin: plane.adminUrl,
    ingress: plane.ingressUrl,
  });
  if (config.profile === 'standalone' && process.stdout.isTTY !== false) {
    process.stdout.write(
      [
        '',
        `  Admin API + probes : ${plane.adminUrl}   (GET /readyz, GET /openapi.json, Swagger UI at /docs)`,
        `  Worker ingress     : ${plane.ingressUrl} (mTLS, CA ${config.tlsCaPath})`,
        `  First API key      : npm run api-key -- --name me --role admin`,
        `  More workers       : npm run pki -- --worker <id>; QL_WORKER_ID=<id> npm run start:worker`,
        '',
      ].join('\n'),
    );
  }
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    log('shutting down', { signal });
    const timer = setTimeout(() => process.exit(1), config.shutdownGraceMs + 1000);
    timer.unref();
    plane.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}

main().catch((error: unknown) => {
  process.stderr.write(
    `control plane failed to start: ${error instanceof Error ? error.message : String(error)}\n`,
  );
  process.exit(1);
});
