/**
 * Heartbeats over mTLS into one control-plane replica, beside a Node `https` hello-world with the same
 * certificates in its own process (issue 10). Hundreds of workers, each with its own certificate and
 * its own keep-alive connection; a fixed number of requests in flight (closed loops, each loop going
 * round its own share of the workers, so a worker never has two heartbeats in flight).
 *
 * Per dialect, three targets, each its own process with its own database, measured in alternated
 * rounds:
 *   hello      `https.createServer` with the ingress's certificates, client certificates required,
 *              answering each POST with a small JSON (the ceiling: TLS + HTTP in Node, nothing else)
 *   batched    the control plane as shipped (QL_HEARTBEAT_BATCH_WINDOW_MS 2, QL_HEARTBEAT_BATCH_MAX 64)
 *   unbatched  the same with batching off (window 0): each heartbeat its own statement
 */
import { Agent, request } from 'node:https';
import { IngressAction, ingressPath } from '@ql/contracts';
import { benchRegistration, newSessionId } from './lib/fixtures';
import { MeasureWindow, Sample, closedLoops, median } from './lib/measure';
import {
  BenchDatabase,
  BenchPki,
  Dialect,
  PlaneProcess,
  createBenchPki,
  createPlaneDatabase,
  startPlaneProcess,
} from './lib/plane';
import { BenchProcess, spawnNode } from './lib/processes';

export const MTLS_TARGETS = ['hello', 'batched', 'unbatched'] as const;
export type MtlsTarget = (typeof MTLS_TARGETS)[number];

export interface MtlsConfig {
  readonly workers: number;
  readonly inFlight: number;
  readonly rounds: number;
  readonly window: MeasureWindow;
  readonly dialects: readonly Dialect[];
  readonly pgAdminUrl: string;
  readonly log: (line: string) => void;
}

export interface MtlsRow {
  readonly dialect: Dialect;
  /** Median heartbeats/s per target. */
  readonly median: Record<MtlsTarget, number>;
  /** Median over rounds of target / hello in the same round. */
  readonly ratioToHello: { readonly batched: number; readonly unbatched: number };
  /**
   * Median over the rounds of the serving process's own CPU ms per 1,000 requests (warm-up included):
   * much less disturbed by busy neighbours than requests/s.
   */
  readonly serverCpuMsPer1000: Record<MtlsTarget, number>;
  readonly samples: Record<MtlsTarget, Sample[]>;
}

export interface BenchWorker {
  readonly workerId: string;
  sessionId: string;
  generation: number;
  version: number;
  agent: Agent;
}

export interface Target {
  readonly url: URL;
  readonly process: BenchProcess;
  readonly workers: BenchWorker[];
  stop(): Promise<void>;
}

/** One POST with the worker's own connection; resolves with status and parsed body. */
export function post(
  target: URL,
  agent: Agent,
  path: string,
  body: unknown,
): Promise<{ status: number; body: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const data = JSON.stringify(body);
    const req = request(
      {
        host: target.hostname,
        port: target.port,
        path,
        method: 'POST',
        agent,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          resolve({
            status: res.statusCode ?? 0,
            body: text ? (JSON.parse(text) as Record<string, unknown>) : {},
          });
        });
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(data);
  });
}

function agentsFor(pki: BenchPki, ids: readonly string[]): BenchWorker[] {
  return ids.map((workerId) => {
    const c = pki.credentials(workerId);
    return {
      workerId,
      sessionId: newSessionId(),
      generation: 1,
      version: 0,
      agent: new Agent({ keepAlive: true, maxSockets: 1, ca: c.caPem, cert: c.certPem, key: c.keyPem }),
    };
  });
}

const path = (w: BenchWorker, action: IngressAction) => ingressPath(w.workerId, w.sessionId, action);

/** The hello-world: the ingress's own certificate and CA, client certificates required, TLS 1.3. */
export async function startHello(pki: BenchPki, ids: readonly string[]): Promise<Target> {
  const code = `
    const https = require('node:https');
    const fs = require('node:fs');
    const server = https.createServer({
      key: fs.readFileSync(${JSON.stringify(pki.serverKeyPath)}),
      cert: fs.readFileSync(${JSON.stringify(pki.serverCertPath)}),
      ca: fs.readFileSync(${JSON.stringify(pki.caCertPath)}),
      requestCert: true, rejectUnauthorized: true, minVersion: 'TLSv1.3',
    }, (req, res) => {
      const chunks = [];
      req.on('data', (c) => chunks.push(c));
      req.on('end', () => {
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
        const answer = JSON.stringify({ version: body.expectedVersion + 1, status: 'online', cancelAttemptIds: [] });
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(answer) });
        res.end(answer);
      });
    });
    server.keepAliveTimeout = 600000;
    server.listen(0, '127.0.0.1', () => process.send(server.address().port));`;
  const proc = spawnNode(['-e', code], {}, true);
  const port = await new Promise<number>((resolve, reject) => {
    proc.child.once('message', (m) => resolve(m as number));
    void proc.exited.then((c) => reject(new Error(`hello-world exited ${c}: ${proc.output.join('\n')}`)));
  });
  return {
    url: new URL(`https://127.0.0.1:${port}`),
    process: proc,
    workers: agentsFor(pki, ids),
    stop: () => proc.stop(),
  };
}

/** A control plane with its own database; every worker registered over its own connection. */
async function startPlane(
  dialect: Dialect,
  pgAdminUrl: string,
  pki: BenchPki,
  ids: readonly string[],
  windowMs: number,
): Promise<Target> {
  const db: BenchDatabase = await createPlaneDatabase(dialect, pgAdminUrl);
  let plane: PlaneProcess | undefined;
  try {
    plane = await startPlaneProcess(db, pki, {
      QL_HEARTBEAT_BATCH_WINDOW_MS: String(windowMs),
      // The other targets' samples run between this one's: sessions must outlive them.
      QL_SESSION_LEASE_MS: '600000',
      QL_INGRESS_RATE_PER_SECOND: '100000',
      QL_INGRESS_RATE_BURST: '100000',
      QL_CRON_TICK_MS: '0',
    });
    const url = new URL(plane.ready.ingressUrl);
    const workers = agentsFor(pki, ids);
    for (const w of workers) {
      const res = await post(url, w.agent, path(w, 'register'), benchRegistration());
      if (res.status !== 200 && res.status !== 201)
        throw new Error(`register ${w.workerId}: ${res.status} ${JSON.stringify(res.body)}`);
      w.generation = res.body.generation as number;
      w.version = res.body.version as number;
    }
    const started = plane;
    return {
      url,
      process: plane.process,
      workers,
      stop: async () => {
        await started.stop();
        await db.drop();
      },
    };
  } catch (error) {
    await plane?.stop();
    await db.drop();
    throw error;
  }
}

interface Loop {
  /** Workers this loop goes round. */
  readonly size: number;
  readonly op: () => Promise<void>;
}

/** `inFlight` closed loops; loop j heartbeats workers j, j + inFlight, … in turn. */
function loopsFor(target: Target, inFlight: number): Loop[] {
  return Array.from({ length: inFlight }, (_, j) => {
    const mine = target.workers.filter((_, i) => i % inFlight === j);
    let next = 0;
    return {
      size: mine.length,
      op: async () => {
        const w = mine[next++ % mine.length]!;
        const res = await post(target.url, w.agent, path(w, 'heartbeat'), {
          generation: w.generation,
          expectedVersion: w.version,
          availableSlots: 4,
        });
        if (res.status !== 200)
          throw new Error(`heartbeat ${w.workerId}: ${res.status} ${JSON.stringify(res.body)}`);
        w.version = res.body.version as number;
      },
    };
  });
}

/**
 * Untimed: one heartbeat per worker, so every connection is open (its TLS handshake done) before a
 * sample starts, whichever target ran last.
 */
async function touchAll(loops: readonly Loop[]): Promise<void> {
  await Promise.all(
    loops.map(async (loop) => {
      // A keep-alive connection the server closed while idle fails once; the retry opens a new one.
      for (let i = 0; i < loop.size; i++) await loop.op().catch(() => loop.op());
    }),
  );
}

export async function benchMtls(config: MtlsConfig, rows: MtlsRow[]): Promise<void> {
  const ids = Array.from({ length: config.workers }, (_, i) => `mtls-w${i}`);
  // Generating hundreds of pairs is the slow part of the set-up: once for both dialects.
  const pki = await createBenchPki(ids);
  try {
    for (const dialect of config.dialects) {
      const targets: Partial<Record<MtlsTarget, Target>> = {};
      try {
        targets.hello = await startHello(pki, ids);
        targets.batched = await startPlane(dialect, config.pgAdminUrl, pki, ids, 2);
        targets.unbatched = await startPlane(dialect, config.pgAdminUrl, pki, ids, 0);
        const samples: Record<MtlsTarget, Sample[]> = { hello: [], batched: [], unbatched: [] };
        const cpu: Record<MtlsTarget, number[]> = { hello: [], batched: [], unbatched: [] };
        for (let round = 1; round <= config.rounds; round++) {
          const order = MTLS_TARGETS.map((_, i) => MTLS_TARGETS[(i + round - 1) % MTLS_TARGETS.length]!);
          for (const name of order) {
            const target = targets[name]!;
            const loops = loopsFor(target, config.inFlight);
            await touchAll(loops);
            const cpuBefore = target.process.cpuMs();
            const sample = await closedLoops(
              loops.map((l) => l.op),
              config.window,
            );
            cpu[name].push(((target.process.cpuMs() - cpuBefore) / sample.totalOps) * 1000);
            samples[name].push(sample);
            config.log(
              `  mtls ${dialect} round ${round} ${name.padEnd(9)} ${String(Math.round(sample.opsPerSecond)).padStart(6)} heartbeats/s`,
            );
          }
        }
        const ratio = (name: 'batched' | 'unbatched') =>
          median(samples[name].map((s, i) => s.opsPerSecond / samples.hello[i]!.opsPerSecond));
        rows.push({
          dialect,
          median: {
            hello: median(samples.hello.map((s) => s.opsPerSecond)),
            batched: median(samples.batched.map((s) => s.opsPerSecond)),
            unbatched: median(samples.unbatched.map((s) => s.opsPerSecond)),
          },
          ratioToHello: { batched: ratio('batched'), unbatched: ratio('unbatched') },
          serverCpuMsPer1000: {
            hello: median(cpu.hello),
            batched: median(cpu.batched),
            unbatched: median(cpu.unbatched),
          },
          samples,
        });
      } finally {
        for (const t of Object.values(targets)) {
          for (const w of t.workers) w.agent.destroy();
          await t.stop();
        }
      }
    }
  } finally {
    pki.remove();
  }
}
