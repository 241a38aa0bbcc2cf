/**
 * The heartbeat as the ingress serves it once the guard has passed, without HTTP and TLS:
 *   service  RegistryService.heartbeat with the body as a plain object: the domain's reader checks it
 *   edge     the listener's EdgeValidationPipe first (HeartbeatDto through class-validator), then the
 *            same service call with the DTO: what the ingress runs since request DTOs came in
 * `edge` − `service` in the same run is what the DTO layer costs a heartbeat; `validationCost` is the
 * same figure without the database, as CPU time in a tight loop.
 */
import {
  SqlActivationRepository,
  SqlDatabase,
  SqlOperationalStatsRepository,
  SqlWorkerCertificateRepository,
  SqlWorkerSessionRepository,
} from '@ql/persistence';
import { createIdGenerator, parseHeartbeat, parseRegistration } from '@ql/contracts';
import { ControlPlaneConfig, loadConfig } from '../apps/control-plane/src/config/config';
import { CertificateForks } from '../apps/control-plane/src/identity/certificate-forks';
import { SessionWireVersions } from '../apps/control-plane/src/identity/session-wire-versions';
import { IngressRateLimit } from '../apps/control-plane/src/identity/ingress-rate-limit';
import { EdgeValidationPipe } from '../apps/control-plane/src/http/validation/edge-validation.pipe';
import { WorkerPrincipal } from '../apps/control-plane/src/identity/worker-principal';
import { ControlPlaneMetrics } from '../apps/control-plane/src/metrics/control-plane-metrics';
import { RegisterDto } from '../apps/control-plane/src/registry/dto/register.dto';
import { HeartbeatDto } from '../apps/control-plane/src/registry/dto/session-fence.dto';
import { RegistryService } from '../apps/control-plane/src/registry/registry.service';
import { benchRegistration } from './lib/fixtures';

/** What one heartbeat loop needs of its worker (heartbeat.ts's Worker). */
interface Fenced {
  readonly workerId: string;
  readonly sessionId: string;
  readonly generation: number;
  version: number;
}

const pipe = new EdgeValidationPipe();
const AS_HEARTBEAT = { type: 'body', metatype: HeartbeatDto } as const;

/** One heartbeat through the service, the body through the edge pipe first when `edge`. */
export function registryOp(
  db: SqlDatabase,
  repo: SqlWorkerSessionRepository,
  leaseMs: number,
  slots: number,
  edge: boolean,
) {
  // The service as the app runs it, metrics included (their cost is part of the figure).
  const metrics = new ControlPlaneMetrics(new SqlOperationalStatsRepository(db));
  // The cancel-intent read each heartbeat answer carries is part of the figure too.
  const registry = new RegistryService(
    repo,
    new SqlActivationRepository(db),
    { sessionLeaseMs: leaseMs, heartbeatBatchWindowMs: 0, heartbeatBatchMax: 1 } as ControlPlaneConfig,
    metrics,
    new IngressRateLimit(loadConfig({})),
    new CertificateForks(new SqlWorkerCertificateRepository(db, createIdGenerator()), metrics),
    new SessionWireVersions(repo),
  );
  return (w: Fenced) => {
    const principal = { workerId: w.workerId } as WorkerPrincipal;
    return async () => {
      const body = { generation: w.generation, expectedVersion: w.version, availableSlots: slots };
      const dto = (edge ? pipe.transform(body, AS_HEARTBEAT) : body) as HeartbeatDto;
      w.version = (await registry.heartbeat(principal, w.sessionId, dto)).version;
    };
  };
}

export interface ValidationCost {
  /** CPU µs per body: the edge pipe (class-validator), and the domain's reader alone. */
  readonly heartbeat: { readonly edgeUs: number; readonly domainUs: number };
  readonly register: { readonly edgeUs: number; readonly domainUs: number };
}

function cpuUsPerCall(fn: () => unknown, iterations: number): number {
  for (let i = 0; i < Math.min(iterations, 5_000); i++) fn();
  const start = process.cpuUsage();
  for (let i = 0; i < iterations; i++) fn();
  const used = process.cpuUsage(start);
  return (used.user + used.system) / iterations;
}

export function validationCost(iterations: number): ValidationCost {
  const heartbeat = { generation: 1, expectedVersion: 41, availableSlots: 4 };
  const register = benchRegistration();
  const AS_REGISTER = { type: 'body', metatype: RegisterDto } as const;
  return {
    heartbeat: {
      edgeUs: cpuUsPerCall(() => pipe.transform(heartbeat, AS_HEARTBEAT), iterations),
      domainUs: cpuUsPerCall(() => parseHeartbeat(heartbeat), iterations),
    },
    // The register figures are for scale: one register per worker process start.
    register: {
      edgeUs: cpuUsPerCall(() => pipe.transform(register, AS_REGISTER), iterations / 10),
      domainUs: cpuUsPerCall(() => parseRegistration(register), iterations / 10),
    },
  };
}
