import { readFileSync } from 'node:fs';
import type { Server } from 'node:http';
import { LoggerService, LogLevel } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter, NestFastifyApplication } from '@nestjs/platform-fastify';
import { Clock } from '@ql/domain';
import { INGRESS_MAX_BODY, PROTOCOL_VERSION_OF_WIRE } from '@ql/contracts';
import { serveApiDocs } from './api-docs';
import { AdminAppModule, IngressAppModule } from './app.modules';
import { ConfigError, ControlPlaneConfig } from './config/config';
import { SecretKeyError, UnavailableError } from '@ql/domain';
import { configureBundleUploads } from './bundles/bundle-uploads';
import { ControlPlaneCore, openCore } from './core/core';
import {
  ADMIN_EDGE,
  INGRESS_EDGE,
  configureAdminEdge,
  configureIngressEdge,
  edgeServerOptions,
  requireTrustedClientCertificate,
} from './http/edge';
import { boundConnectionLifetime } from './http/connection-lifetime';
import { boundUncredentialedConnections } from './http/uncredentialed-connections';
import { JsonLogger } from './http/json-logger';
import { WorkerIssuer } from './enrollment/worker-issuer';
import { ensureDevPkiApart } from './pki/dev-pki-apart';

export interface ControlPlane {
  readonly core: ControlPlaneCore;
  readonly adminUrl: string;
  readonly ingressUrl: string;
  readonly admin: NestFastifyApplication;
  readonly ingress: NestFastifyApplication;
  /** Marks not-ready, stops both listeners, closes the database. */
  close(): Promise<void>;
}

export interface StartOptions {
  readonly clock?: Clock;
  readonly logger?: LoggerService | false;
}

const LEVELS: Record<ControlPlaneConfig['logLevel'], LogLevel[]> = {
  debug: ['debug', 'log', 'warn', 'error', 'fatal'],
  info: ['log', 'warn', 'error', 'fatal'],
  warn: ['warn', 'error', 'fatal'],
  error: ['error', 'fatal'],
};

/** Task bodies carry commands up to 32 KiB and env up to 32 KiB (TASK_LIMITS). */
const ADMIN_MAX_BODY = 128 * 1024;

/** Starts the control plane: one core, two Nest applications on two listeners. */
export async function startControlPlane(
  config: ControlPlaneConfig,
  options: StartOptions = {},
): Promise<ControlPlane> {
  if (config.profile === 'worker')
    throw new Error('QL_PROFILE=worker runs apps/worker, not the control plane');
  if (config.devPki)
    await ensureDevPkiApart(config.devPkiDir, { trustDomain: config.trustDomain, workers: ['worker-1'] });
  const tls = {
    ca: readFileSync(config.tlsCaPath),
    cert: readFileSync(config.tlsCertPath),
    key: readFileSync(config.tlsKeyPath),
  };
  const workerIssuer = WorkerIssuer.load(config);
  const logger = options.logger === undefined ? new JsonLogger(LEVELS[config.logLevel]) : options.logger;
  const core = await openCore(config, options.clock, workerIssuer);
  try {
    await checkSecretKeys(core);
    const admin = await NestFactory.create<NestFastifyApplication>(
      AdminAppModule.forCore(core),
      new FastifyAdapter({ bodyLimit: ADMIN_MAX_BODY, ...edgeServerOptions(ADMIN_EDGE) }),
      { logger, abortOnError: false, bodyParser: false },
    );
    configureAdminEdge(admin.getHttpAdapter().getInstance(), ADMIN_MAX_BODY);
    configureBundleUploads(admin.getHttpAdapter().getInstance(), {
      maxBytes: config.bundleMaxBytes,
      maxConcurrent: config.bundleUploadsMax,
      keys: core.repositories.apiKeys,
      sessions: core.repositories.consoleSessions,
      metrics: core.metrics,
    });
    // A handshake without a trusted certificate is let through for the enrollment route only: the
    // gate, the first hook, refuses everything else on such a connection (ADR 0045 §2).
    const ingressAdapter = new FastifyAdapter({
      https: {
        ...tls,
        requestCert: true,
        rejectUnauthorized: false,
        minVersion: 'TLSv1.3',
        handshakeTimeout: config.ingressHandshakeTimeoutMs,
      },
      bodyLimit: INGRESS_MAX_BODY,
      ...edgeServerOptions(INGRESS_EDGE),
    });
    requireTrustedClientCertificate(ingressAdapter.getInstance());
    const ingress = await NestFactory.create<NestFastifyApplication>(
      IngressAppModule.forCore(core),
      ingressAdapter,
      { logger, abortOnError: false, bodyParser: false },
    );
    configureIngressEdge(
      ingress.getHttpAdapter().getInstance(),
      INGRESS_MAX_BODY,
      config.protocolMax === PROTOCOL_VERSION_OF_WIRE[1],
    );
    boundConnectionLifetime(ingress.getHttpServer(), 'secureConnection', config.ingressConnectionMaxMs);
    boundUncredentialedConnections(ingress.getHttpServer(), {
      requestTimeoutMs: config.ingressUncredentialedTimeoutMs,
      perAddress: config.ingressUncredentialedPerAddress,
      total: config.ingressUncredentialedMax,
    });
    serveApiDocs(admin, ingress);
    await admin.listen(config.adminPort, config.adminHost);
    await ingress.listen(config.ingressPort, config.ingressHost);
    core.readiness.markStarted();
    const adminUrl = urlOf(admin, 'http');
    const ingressUrl = urlOf(ingress, 'https');
    return {
      core,
      adminUrl,
      ingressUrl,
      admin,
      ingress,
      close: async () => {
        core.readiness.markStopping();
        // A waiting log tail answers now: the listeners' close waits for requests in flight.
        core.logWaiters.close();
        core.offerWaiters.close(); // a held pull answers idle now (ADR 0019)
        // Past QL_SHUTDOWN_GRACE_MS a request still in flight (an upload stalled mid-body, say) is
        // cut off, so the database still closes cleanly and the process exits 0.
        const cutOff = setTimeout(() => {
          for (const app of [admin, ingress]) (app.getHttpServer() as Server).closeAllConnections();
        }, config.shutdownGraceMs);
        await Promise.allSettled([ingress.close(), admin.close()]);
        clearTimeout(cutOff);
        await core.queueSignals.close();
        await core.db.close();
      },
    };
  } catch (error) {
    core.offerWaiters.close();
    await core.queueSignals.close();
    await core.db.close();
    throw error;
  }
}

/**
 * ADR 0050: a value under each stored key id is decrypted before the listeners open, so a key that
 * is missing or wrong stops the start as a configuration error naming the key id, never later at a
 * run. A database not migrated yet holds no secrets (a cluster replica before `npm run migrate`).
 */
async function checkSecretKeys(core: ControlPlaneCore): Promise<void> {
  if (!(await core.db.migrationsApplied())) return;
  try {
    await core.repositories.secrets.checkKeys();
  } catch (error) {
    if (
      error instanceof SecretKeyError ||
      (error instanceof UnavailableError && error.reason === 'secrets_key_missing')
    )
      throw new ConfigError(error.message);
    throw error;
  }
}

function urlOf(app: NestFastifyApplication, scheme: 'http' | 'https'): string {
  const address = app.getHttpServer().address();
  if (!address || typeof address === 'string') throw new Error('listener has no address');
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return `${scheme}://${host}:${address.port}`;
}
