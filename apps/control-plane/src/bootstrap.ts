import { readFileSync } from 'node:fs';
import { LoggerService, LogLevel } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter, NestFastifyApplication } from '@nestjs/platform-fastify';
import type { FastifyInstance } from 'fastify';
import { Clock } from '@ql/domain';
import { INGRESS_MAX_BODY, INGRESS_PREFIX, ingressBodyLimit } from '@ql/contracts';
import { AdminAppModule, IngressAppModule } from './app.modules';
import { ControlPlaneConfig } from './config/config';
import { ControlPlaneCore, openCore } from './core/core';
import { IngressRefusal, renderIngressError } from './http/ingress-errors';
import { JsonLogger } from './http/json-logger';
import { ensureDevPki } from './pki';

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

/** Starts the control plane: one core, two Nest applications on two listeners. */
export async function startControlPlane(
  config: ControlPlaneConfig,
  options: StartOptions = {},
): Promise<ControlPlane> {
  if (config.profile === 'worker')
    throw new Error('QL_PROFILE=worker runs apps/worker, not the control plane');
  if (config.devPki)
    await ensureDevPki(config.devPkiDir, { trustDomain: config.trustDomain, workers: ['worker-1'] });
  const tls = {
    ca: readFileSync(config.tlsCaPath),
    cert: readFileSync(config.tlsCertPath),
    key: readFileSync(config.tlsKeyPath),
  };
  const logger = options.logger === undefined ? new JsonLogger(LEVELS[config.logLevel]) : options.logger;
  const core = await openCore(config, options.clock);
  try {
    const admin = await NestFactory.create<NestFastifyApplication>(
      AdminAppModule.forCore(core),
      // Task bodies carry commands up to 32 KiB and env up to 32 KiB (TASK_LIMITS).
      new FastifyAdapter({ bodyLimit: 128 * 1024 }),
      { logger, abortOnError: false },
    );
    const ingress = await NestFactory.create<NestFastifyApplication>(
      IngressAppModule.forCore(core),
      new FastifyAdapter({
        https: { ...tls, requestCert: true, rejectUnauthorized: true, minVersion: 'TLSv1.3' },
        bodyLimit: INGRESS_MAX_BODY,
      }),
      { logger, abortOnError: false, bodyParser: false },
    );
    configureIngress(ingress.getHttpAdapter().getInstance());
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
        await Promise.allSettled([ingress.close(), admin.close()]);
        await core.db.close();
      },
    };
  } catch (error) {
    await core.db.close();
    throw error;
  }
}

/**
 * Ingress edge rules that run before routing and parsing: no query strings (404), a per-route byte
 * limit checked on Content-Length and again on the bytes read (413), strict JSON only.
 */
function configureIngress(fastify: FastifyInstance): void {
  const reply = (
    res: { code(n: number): { type(t: string): { send(b: unknown): unknown } } },
    error: unknown,
  ) => {
    const { status, body } = renderIngressError(error);
    return res.code(status).type('application/json').send(body);
  };
  fastify.addHook('onRequest', async (request, res) => {
    if (request.url.includes('?') || !request.url.startsWith(`${INGRESS_PREFIX}/`)) {
      return reply(res, new IngressRefusal(404, 'worker_route_not_found', 'no such ingress route'));
    }
    const declared = Number(request.headers['content-length'] ?? 0);
    if (declared > ingressBodyLimit(actionOf(request.url))) {
      return reply(
        res,
        new IngressRefusal(413, 'worker_request_too_large', 'request body is over the route limit'),
      );
    }
  });
  fastify.addContentTypeParser(
    'application/json',
    { parseAs: 'buffer', bodyLimit: INGRESS_MAX_BODY },
    (request, body, done) => {
      const bytes = body as Buffer;
      if (bytes.length > ingressBodyLimit(actionOf(request.url))) {
        done(
          new IngressRefusal(413, 'worker_request_too_large', 'request body is over the route limit'),
          undefined,
        );
        return;
      }
      try {
        done(null, JSON.parse(bytes.toString('utf8')));
      } catch {
        done(new IngressRefusal(400, 'invalid_worker_request', 'body is not valid JSON'), undefined);
      }
    },
  );
}

function actionOf(url: string): string {
  return url.slice(url.lastIndexOf('/') + 1);
}

function urlOf(app: NestFastifyApplication, scheme: 'http' | 'https'): string {
  const address = app.getHttpServer().address();
  if (!address || typeof address === 'string') throw new Error('listener has no address');
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return `${scheme}://${host}:${address.port}`;
}
