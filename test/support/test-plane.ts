import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { Agent, request as httpsRequest } from 'node:https';
import request from 'supertest';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { LoggerService } from '@nestjs/common';
import type { Clock } from '@ql/domain';
import { ControlPlane, startControlPlane } from '../../apps/control-plane/src/bootstrap';
import { loadConfig } from '../../apps/control-plane/src/config/config';
import { apiKeyDigest, newApiKeyToken } from '../../apps/control-plane/src/identity/api-keys';
import { DevPkiPaths, PemPair, createWorkerCert, ensureDevPki } from '../../apps/control-plane/src/pki';
import { createPostgresDatabase, createSqliteFile } from './databases';

export const TRUST_DOMAIN = 'test.qinglong.local';

export interface HttpResult {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly body: unknown;
  readonly raw: string;
  /** The answer's bytes as received (ingress calls only): a binary answer such as a bundle. */
  readonly bytes?: Buffer;
}

export type Dialect = 'sqlite' | 'postgres';

/** A database for one test file; several control planes may share it. */
export interface TestDatabase {
  readonly dialect: Dialect;
  readonly url: string;
  dispose(): Promise<void>;
}

export async function createTestDatabase(dialect: Dialect): Promise<TestDatabase> {
  if (dialect === 'sqlite') {
    const file = createSqliteFile();
    return { dialect, url: `sqlite:${file.path}`, dispose: async () => file.remove() };
  }
  const db = await createPostgresDatabase();
  return { dialect, url: db.url, dispose: () => db.drop() };
}

/** A dev PKI in a temp folder with the given workers. */
export async function createTestPki(
  workers: string[] = ['worker-a', 'worker-b'],
): Promise<DevPkiPaths & { remove(): void; caPair(): PemPair }> {
  const dir = mkdtempSync(join(tmpdir(), 'ql-test-pki-'));
  const paths = await ensureDevPki(dir, { trustDomain: TRUST_DOMAIN, workers });
  return {
    ...paths,
    remove: () => rmSync(dir, { recursive: true, force: true }),
    caPair: () => ({
      certPem: readFileSync(paths.caCertPath, 'utf8'),
      keyPem: readFileSync(paths.caKeyPath, 'utf8'),
    }),
  };
}

export interface TestPlane {
  readonly plane: ControlPlane;
  readonly adminToken: string;
  readonly viewerToken: string;
  /** Statements the database has executed so far (the query counter). */
  statements(): number;
  ingress(
    credentials: PemPair | null,
    path: string,
    body?: unknown,
    options?: RequestOptions,
  ): Promise<HttpResult>;
  admin(
    method: string,
    path: string,
    body?: unknown,
    token?: string | null,
    options?: { readonly rawBody?: string | Buffer; readonly headers?: Record<string, string> },
  ): Promise<HttpResult>;
  close(): Promise<void>;
}

export interface RequestOptions {
  readonly method?: string;
  readonly rawBody?: string | Buffer;
  readonly headers?: Record<string, string>;
  readonly maxVersion?: 'TLSv1.2' | 'TLSv1.3';
}

/**
 * Starts a real control plane (both listeners, real TLS) on free ports. `admin` goes through supertest
 * on the admin listener's server; `ingress` through real mTLS sockets with the given certificate.
 */
export async function startTestPlane(
  db: TestDatabase,
  pki: DevPkiPaths,
  env: Record<string, string> = {},
  options: { seedKeys?: boolean; clock?: Clock; logger?: LoggerService } = {},
): Promise<TestPlane> {
  const config = loadConfig({
    QL_PROFILE: db.dialect === 'sqlite' ? 'standalone' : 'cluster-control',
    QL_DATABASE_URL: db.url,
    QL_ADMIN_PORT: '0',
    QL_INGRESS_PORT: '0',
    QL_DEV_PKI: 'false',
    QL_TLS_CA: pki.caCertPath,
    QL_TLS_CERT: pki.serverCertPath,
    QL_TLS_KEY: pki.serverKeyPath,
    QL_TRUST_DOMAIN: TRUST_DOMAIN,
    QL_LOG_LEVEL: 'error',
    QL_DB_POOL_SIZE: '4',
    // Tests drive the sweeper and cron by calling them; a test that wants the timers sets these.
    QL_SWEEP_INTERVAL_MS: '0',
    QL_CRON_TICK_MS: '0',
    ...env,
  });
  const plane = await startControlPlane(config, { logger: options.logger ?? false, clock: options.clock });
  const ca = readFileSync(pki.caCertPath);
  const agents = new Map<string, Agent>();
  const agentFor = (credentials: PemPair | null, maxVersion: RequestOptions['maxVersion']) => {
    const key = `${credentials?.certPem ?? 'none'}|${maxVersion ?? ''}`;
    let agent = agents.get(key);
    if (!agent) {
      agent = new Agent({
        ca,
        keepAlive: true,
        maxSockets: 4,
        ...(credentials ? { cert: credentials.certPem, key: credentials.keyPem } : {}),
        ...(maxVersion ? { maxVersion } : {}),
      });
      agents.set(key, agent);
    }
    return agent;
  };
  const makeKey = async (role: 'admin' | 'viewer') => {
    const token = newApiKeyToken();
    await plane.core.repositories.apiKeys.create(
      { id: plane.core.ids.uuidV7(), name: `test-${role}`, role, digest: apiKeyDigest(token) },
      { actor: 'test', action: 'api_key.create', target: 'test' },
    );
    return token;
  };
  const seed = options.seedKeys ?? true;
  const adminToken = seed ? await makeKey('admin') : '';
  const viewerToken = seed ? await makeKey('viewer') : '';
  return {
    plane,
    adminToken,
    viewerToken,
    statements: () => plane.core.db.statements.value,
    ingress: (credentials, path, body, options = {}) => {
      const url = new URL(path, plane.ingressUrl);
      const payload = options.rawBody ?? (body === undefined ? undefined : JSON.stringify(body));
      return send(
        httpsRequest(url, {
          method: options.method ?? 'POST',
          agent: agentFor(credentials, options.maxVersion),
          servername: 'localhost',
          headers: {
            ...(payload !== undefined
              ? { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(payload)) }
              : {}),
            ...options.headers,
          },
        }),
        payload,
      );
    },
    admin: (method, path, body, token = adminToken, options = {}) => {
      const payload = options.rawBody ?? (body === undefined ? undefined : JSON.stringify(body));
      const verb = method.toLowerCase() as 'get' | 'post' | 'put' | 'patch' | 'delete';
      const agent = request(plane.admin.getHttpServer());
      let req = agent[verb](path)
        .buffer(true)
        .parse(rawText)
        .ok(() => true);
      if (token) req = req.set('authorization', `Bearer ${token}`);
      if (payload !== undefined) req = req.set('content-type', 'application/json');
      for (const [name, value] of Object.entries(options.headers ?? {})) req = req.set(name, value);
      // Bytes go out as they are (superagent would JSON-encode a Buffer under a JSON content type).
      if (payload !== undefined) req = req.serialize((bytes: unknown) => bytes as string).send(payload);
      return req.then((res) => {
        const raw = res.body as string;
        return { status: res.status, headers: res.headers, body: parseJson(raw), raw };
      });
    },
    close: async () => {
      for (const agent of agents.values()) agent.destroy();
      await plane.close();
    },
  };
}

function send(
  req: import('node:http').ClientRequest,
  payload: string | Buffer | undefined,
): Promise<HttpResult> {
  return new Promise((resolve, reject) => {
    req.on('error', reject);
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('error', reject);
      res.on('end', () => {
        const bytes = Buffer.concat(chunks);
        const raw = bytes.toString('utf8');
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: parseJson(raw), raw, bytes });
      });
    });
    req.end(payload);
  });
}

/** The body as JSON when it is JSON, else the text itself. */
function parseJson(raw: string): unknown {
  try {
    return raw ? JSON.parse(raw) : undefined;
  } catch {
    return raw;
  }
}

/** supertest keeps the body as text (we parse it ourselves, whatever the content type says). */
function rawText(res: request.Response, done: (error: Error | null, body: string) => void) {
  const chunks: Buffer[] = [];
  res.on('data', (c: Buffer) => chunks.push(c));
  res.on('error', (error) => done(error, ''));
  res.on('end', () => done(null, Buffer.concat(chunks).toString('utf8')));
}

export function readPair(paths: { certPath: string; keyPath: string }): PemPair {
  return { certPem: readFileSync(paths.certPath, 'utf8'), keyPem: readFileSync(paths.keyPath, 'utf8') };
}

export { createWorkerCert };
